// Schemes that sign the body (and perhaps a timestamp) with a shared secret:
// GitHub, Stripe, Slack, Shopify, PagerDuty, and the generic `hmac`.

#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <fmt/format.h>

namespace idem::verify::detail {

using crypto::HashAlgorithm;

namespace {

SignatureSet single(const SignatureBytes& signature) {
    SignatureSet set;
    set.push_back(signature);
    return set;
}

std::string_view nonce_or(const record::Envelope& envelope, std::string_view id_header,
                          std::string_view fallback) {
    return envelope.header(id_header).value_or(fallback);
}

// GitHub's "sha256=<hex>" (or legacy "sha1=<hex>") header.
Verdict verify_github_header(Input& input, std::string_view header_name, std::string_view value,
                             HashAlgorithm algorithm) {
    const auto& envelope = input.envelope;
    std::string_view prefix = algorithm == HashAlgorithm::sha1 ? "sha1=" : "sha256=";
    if (!value.starts_with(prefix))
        return invalid(Scheme::github,
                       fmt::format("malformed header '{}': expected '{}' followed by hex",
                                   header_name, prefix));
    auto decoded = decode_signature(value.substr(prefix.size()), SignatureEncoding::hex,
                                    crypto::digest_size(algorithm), "the signature");
    if (!decoded.bytes) return invalid(Scheme::github, decoded.problem);
    const auto& keys = input.keys.hmac(KeyDerivation::raw, algorithm, Scheme::github);
    auto label = match_hmac(keys, single(*decoded.bytes), {envelope.body});
    if (!label) return invalid(Scheme::github, no_match_reason(keys.size(), 1));
    return matched(input, Scheme::github, *label, nonce_or(envelope, "X-GitHub-Delivery", value),
                   std::nullopt, {envelope.body});
}

} // namespace

Verdict verify_github(Input& input) {
    const auto& envelope = input.envelope;
    if (auto value = envelope.header("X-Hub-Signature-256"))
        return verify_github_header(input, "X-Hub-Signature-256", *value, HashAlgorithm::sha256);
    if (auto legacy = envelope.header("X-Hub-Signature")) {
        if (input.config.sha1 == Sha1Policy::reject)
            return invalid(Scheme::github,
                           "only the legacy SHA-1 'X-Hub-Signature' is present; pass "
                           "--allow-sha1 to accept it");
        return verify_github_header(input, "X-Hub-Signature", *legacy, HashAlgorithm::sha1);
    }
    return invalid(Scheme::github, missing_header("X-Hub-Signature-256"));
}

Verdict verify_stripe(Input& input) {
    const auto& envelope = input.envelope;
    auto header = envelope.header("Stripe-Signature");
    if (!header) return invalid(Scheme::stripe, missing_header("Stripe-Signature"));
    std::optional<std::string_view> timestamp_text;
    SignatureTexts v1;
    for (auto item : split(*header, ',')) {
        item = trim(item);
        auto equals = item.find('=');
        if (equals == std::string_view::npos) continue;
        auto key = item.substr(0, equals);
        auto value = item.substr(equals + 1);
        if (key == "t" && !timestamp_text)
            timestamp_text = value;
        else if (key == "v1")
            v1.push_back(value);
        // Other versions (v0 test-mode signatures) are ignored, as Stripe's libraries do.
    }
    if (!timestamp_text)
        return invalid(Scheme::stripe, "malformed header 'Stripe-Signature': no t= timestamp");
    auto signed_at = parse_signed_time(input.config, *timestamp_text);
    if (!signed_at)
        return invalid(Scheme::stripe,
                       fmt::format("malformed header 'Stripe-Signature': t={} is not a "
                                   "Unix timestamp",
                                   quote(*timestamp_text, 20)));
    if (v1.empty()) return invalid(Scheme::stripe, "no v1 signature in header 'Stripe-Signature'");
    auto candidates = decode_all(v1, SignatureEncoding::hex, 32, "the v1 signature");
    if (candidates.signatures.empty()) return invalid(Scheme::stripe, candidates.problem);
    const auto& keys = input.keys.hmac(KeyDerivation::raw, HashAlgorithm::sha256, Scheme::stripe);
    auto label = match_hmac(keys, candidates.signatures, {*timestamp_text, ".", envelope.body});
    if (!label) return invalid(Scheme::stripe, no_match_reason(keys.size(), v1.size()));
    // Stripe's libraries reject only timestamps older than the tolerance.
    if (auto stale = check_age(input, *signed_at, ClockSides::past_only))
        return invalid(Scheme::stripe, *stale);
    return matched(input, Scheme::stripe, *label, v1.front(), signed_at,
                   {*timestamp_text, ".", envelope.body});
}

Verdict verify_slack(Input& input) {
    const auto& envelope = input.envelope;
    auto signature = envelope.header("X-Slack-Signature");
    if (!signature) return invalid(Scheme::slack, missing_header("X-Slack-Signature"));
    auto timestamp_text = envelope.header("X-Slack-Request-Timestamp");
    if (!timestamp_text) return invalid(Scheme::slack, missing_header("X-Slack-Request-Timestamp"));
    auto signed_at = parse_signed_time(input.config, *timestamp_text);
    if (!signed_at)
        return invalid(Scheme::slack,
                       fmt::format("malformed header 'X-Slack-Request-Timestamp': {} is "
                                   "not a Unix timestamp",
                                   quote(*timestamp_text, 20)));
    if (!signature->starts_with("v0="))
        return invalid(Scheme::slack,
                       "malformed header 'X-Slack-Signature': expected 'v0=' followed by hex");
    auto decoded =
        decode_signature(signature->substr(3), SignatureEncoding::hex, 32, "the signature");
    if (!decoded.bytes) return invalid(Scheme::slack, decoded.problem);
    const auto& keys = input.keys.hmac(KeyDerivation::raw, HashAlgorithm::sha256, Scheme::slack);
    auto label =
        match_hmac(keys, single(*decoded.bytes), {"v0:", *timestamp_text, ":", envelope.body});
    if (!label) return invalid(Scheme::slack, no_match_reason(keys.size(), 1));
    if (auto stale = check_age(input, *signed_at, ClockSides::both))
        return invalid(Scheme::slack, *stale);
    return matched(input, Scheme::slack, *label, *signature, signed_at,
                   {"v0:", *timestamp_text, ":", envelope.body});
}

namespace {
// Shopify names its headers with "X-" and, in its newer deliveries and
// SDKs, without it (shopify-hmac-sha256, shopify-webhook-id): either is
// read, the "X-" one first.
std::optional<std::string_view> shopify_header(const record::Envelope& envelope,
                                               std::string_view name) {
    if (auto value = envelope.header(fmt::format("X-Shopify-{}", name))) return value;
    return envelope.header(fmt::format("Shopify-{}", name));
}
} // namespace

Verdict verify_shopify(Input& input) {
    const auto& envelope = input.envelope;
    auto signature = shopify_header(envelope, "Hmac-Sha256");
    if (!signature)
        return invalid(Scheme::shopify,
                       missing_header("X-Shopify-Hmac-Sha256 (or Shopify-Hmac-Sha256)"));
    auto decoded = decode_signature(*signature, SignatureEncoding::base64, 32, "the signature");
    if (!decoded.bytes) return invalid(Scheme::shopify, decoded.problem);
    const auto& keys = input.keys.hmac(KeyDerivation::raw, HashAlgorithm::sha256, Scheme::shopify);
    auto label = match_hmac(keys, single(*decoded.bytes), {envelope.body});
    if (!label) return invalid(Scheme::shopify, no_match_reason(keys.size(), 1));
    return matched(input, Scheme::shopify, *label,
                   shopify_header(envelope, "Webhook-Id").value_or(*signature), std::nullopt,
                   {envelope.body});
}

Verdict verify_pagerduty(Input& input) {
    const auto& envelope = input.envelope;
    auto header = envelope.header("X-PagerDuty-Signature");
    if (!header) return invalid(Scheme::pagerduty, missing_header("X-PagerDuty-Signature"));
    SignatureTexts v1;
    for (auto item : split(*header, ',')) {
        item = trim(item);
        if (item.starts_with("v1=")) v1.push_back(item.substr(3));
    }
    if (v1.empty())
        return invalid(Scheme::pagerduty, "no v1= signature in header 'X-PagerDuty-Signature'");
    auto candidates = decode_all(v1, SignatureEncoding::hex, 32, "the v1 signature");
    if (candidates.signatures.empty()) return invalid(Scheme::pagerduty, candidates.problem);
    const auto& keys =
        input.keys.hmac(KeyDerivation::raw, HashAlgorithm::sha256, Scheme::pagerduty);
    auto label = match_hmac(keys, candidates.signatures, {envelope.body});
    if (!label) return invalid(Scheme::pagerduty, no_match_reason(keys.size(), v1.size()));
    return matched(input, Scheme::pagerduty, *label, nonce_or(envelope, "X-Webhook-Id", v1.front()),
                   std::nullopt, {envelope.body});
}

std::string expand_message_template(std::string_view pattern, const TemplateValues& values) {
    const std::pair<std::string_view, const std::optional<std::string_view>*> placeholders[] = {
        {"{body}", &values.body},     {"{timestamp}", &values.timestamp}, {"{id}", &values.id},
        {"{method}", &values.method}, {"{path}", &values.path},           {"{url}", &values.url},
        {"{crc32}", &values.crc32}};
    std::string message;
    std::string_view rest = pattern;
    while (!rest.empty()) {
        auto open = rest.find('{');
        message.append(rest.substr(0, open));
        if (open == std::string_view::npos) break;
        rest.remove_prefix(open);
        bool replaced = false;
        for (const auto& [name, value] : values.extra)
            if (!replaced && rest.starts_with(name)) {
                message.append(value);
                rest.remove_prefix(name.size());
                replaced = true;
            }
        for (const auto& [name, value] : placeholders)
            if (!replaced && value->has_value() && rest.starts_with(name)) {
                message.append(**value);
                rest.remove_prefix(name.size());
                replaced = true;
                break;
            }
        if (!replaced) { // not a placeholder here: the brace as written
            message.push_back('{');
            rest.remove_prefix(1);
        }
    }
    return message;
}

// The generic scheme: the template with {body}, {timestamp} and {id}
// replaced, assembled into one buffer.
std::string generic_hmac_message(const GenericHmacSpec& spec, std::string_view body,
                                 std::string_view timestamp, std::string_view id) {
    TemplateValues values;
    values.body = body;
    values.timestamp = timestamp;
    values.id = id;
    return expand_message_template(spec.message_template, values);
}

Verdict verify_hmac(Input& input) {
    const auto& envelope = input.envelope;
    const auto& spec = input.config.hmac;
    auto header = envelope.header(spec.header);
    if (!header) return invalid(Scheme::hmac, missing_header(spec.header));
    std::string_view value = trim(*header);
    if (!value.starts_with(spec.prefix))
        return invalid(Scheme::hmac, fmt::format("malformed header '{}': expected the prefix {}",
                                                 spec.header, quote(spec.prefix)));
    value.remove_prefix(spec.prefix.size());
    std::string_view timestamp_text;
    std::optional<Timestamp> signed_at;
    if (!spec.timestamp_header.empty()) {
        auto found = envelope.header(spec.timestamp_header);
        if (!found) return invalid(Scheme::hmac, missing_header(spec.timestamp_header));
        timestamp_text = *found;
        signed_at = parse_signed_time(input.config, timestamp_text);
        if (!signed_at) signed_at = parse_timestamp(timestamp_text);
        if (!signed_at)
            return invalid(Scheme::hmac,
                           fmt::format("malformed header '{}': {} is not a timestamp",
                                       spec.timestamp_header, quote(timestamp_text, 40)));
    }
    std::string_view id;
    if (!spec.id_header.empty()) {
        auto found = envelope.header(spec.id_header);
        if (!found) return invalid(Scheme::hmac, missing_header(spec.id_header));
        id = *found;
    }
    auto decoded = decode_signature(value, spec.encoding, crypto::digest_size(spec.algorithm),
                                    "the signature");
    if (!decoded.bytes) return invalid(Scheme::hmac, decoded.problem);
    const auto& keys = input.keys.hmac(KeyDerivation::raw, spec.algorithm, Scheme::hmac);
    auto message = generic_hmac_message(spec, envelope.body, timestamp_text, id);
    auto label = match_hmac(keys, single(*decoded.bytes), {message});
    if (!label) return invalid(Scheme::hmac, no_match_reason(keys.size(), 1));
    if (signed_at)
        if (auto stale = check_age(input, *signed_at, ClockSides::both))
            return invalid(Scheme::hmac, *stale);
    return matched(input, Scheme::hmac, *label, id.empty() ? value : id, signed_at, {message});
}

} // namespace idem::verify::detail
