#include "idem/verify/scheme.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::verify {

namespace {
struct SchemeEntry {
    Scheme scheme;
    std::string_view name;
};
constexpr SchemeEntry k_schemes[] = {
    {Scheme::github, "github"},       {Scheme::stripe, "stripe"},
    {Scheme::slack, "slack"},         {Scheme::standard, "standard"},
    {Scheme::svix, "svix"},           {Scheme::shopify, "shopify"},
    {Scheme::discord, "discord"},     {Scheme::twilio, "twilio"},
    {Scheme::square, "square"},       {Scheme::pagerduty, "pagerduty"},
    {Scheme::braintree, "braintree"}, {Scheme::hmac, "hmac"},
    {Scheme::auto_detect, "auto"},
};

// Checked in this order; the first header present decides. `companion`: a
// header the scheme always sends beside its signature, when the signature
// header's name is generic enough for others to use (GoCardless signs in a
// Webhook-Signature header of its own).
struct Signature {
    std::string_view header;
    Scheme scheme;
    std::string_view companion = {};
};
constexpr Signature k_signature_headers[] = {
    {"Stripe-Signature", Scheme::stripe},
    // Meta, Bitbucket, Jira and Intercom sign in these headers too; GitHub
    // alone sends X-GitHub-Event beside them.
    {"X-Hub-Signature-256", Scheme::github, "X-GitHub-Event"},
    {"X-Hub-Signature", Scheme::github, "X-GitHub-Event"},
    {"X-Slack-Signature", Scheme::slack},
    {"webhook-signature", Scheme::standard, "webhook-id"},
    {"svix-signature", Scheme::svix, "svix-id"},
    {"X-Shopify-Hmac-Sha256", Scheme::shopify},
    {"Shopify-Hmac-Sha256", Scheme::shopify}, // the names Shopify sends without "X-"
    {"X-Signature-Ed25519", Scheme::discord},
    {"X-Twilio-Signature", Scheme::twilio},
    {"X-Square-HmacSha256-Signature", Scheme::square},
    {"X-Square-Signature", Scheme::square},
    {"X-PagerDuty-Signature", Scheme::pagerduty},
};
} // namespace

std::string_view scheme_name(Scheme scheme) {
    if (scheme == Scheme::provider) return "provider";
    for (const auto& entry : k_schemes)
        if (entry.scheme == scheme) return entry.name;
    return "?";
}

std::vector<std::string> scheme_names() {
    std::vector<std::string> names;
    for (const auto& entry : k_schemes)
        names.emplace_back(entry.name);
    return names;
}

Scheme parse_scheme(std::string_view name) {
    for (const auto& entry : k_schemes)
        if (entry.name == name) return entry.scheme;
    auto hint = closest_name(name, scheme_names());
    throw UsageError(
        fmt::format("unknown scheme {}{}; known: github, stripe, slack, standard, svix, "
                    "shopify, discord, twilio, square, pagerduty, braintree, hmac, auto",
                    quote(name), hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint)));
}

std::optional<DetectedScheme> detect_scheme(const record::Envelope& envelope) {
    for (const auto& signature : k_signature_headers)
        if (envelope.header(signature.header))
            return DetectedScheme{signature.scheme, !signature.companion.empty() &&
                                                        !envelope.header(signature.companion)};
    return std::nullopt;
}

bool uses_public_keys(Scheme scheme) {
    return scheme == Scheme::discord;
}

bool signs_url(Scheme scheme) {
    return scheme == Scheme::twilio || scheme == Scheme::square;
}

} // namespace idem::verify
