#include "idem/verify/verifier.hpp"

#include "idem/record/joined_headers.hpp"
#include "idem/verify/detail/schemes.hpp"
#include "idem/verify/provider_spec.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <optional>

namespace idem::verify {

struct Verifier::Impl {
    const VerifyConfig& config;
    detail::KeyRing keys;
    record::JoinedHeaders joined;
    explicit Impl(const VerifyConfig& c) : config(c), keys(c) {}
};

namespace {
// How the scheme a run is fixed to makes a secret its HMAC key, when that
// can leave no bytes (base64 forms); nullopt for `auto` and raw keys.
std::optional<detail::KeyDerivation> decoding_derivation(const VerifyConfig& config) {
    switch (config.scheme) {
    case Scheme::standard:
    case Scheme::svix:
        return detail::KeyDerivation::standard_base64;
    case Scheme::provider:
        if (config.provider < config.providers.size())
            return detail::key_derivation(config.providers[config.provider]);
        return std::nullopt;
    default:
        return std::nullopt;
    }
}
} // namespace

Verifier::Verifier(const VerifyConfig& config) : m_impl(std::make_unique<Impl>(config)) {
    // A secret that decodes to nothing is refused when the run starts
    // (listen before it serves, verify before it reads), not delivery by
    // delivery; under `auto` the key ring refuses it where it is derived.
    if (auto derivation = decoding_derivation(config))
        for (const auto& secret : config.secrets) {
            std::string key;
            try {
                key = detail::derive_key(secret, *derivation);
            } catch (const UsageError&) {
                continue; // not this provider's form: the key ring says so if none is
            }
            detail::require_key_bytes(secret, key);
            crypto::cleanse(key);
        }
}
Verifier::~Verifier() = default;

namespace {
detail::VerifyFunction verifier_for(Scheme scheme) {
    switch (scheme) {
    case Scheme::github:
        return detail::verify_github;
    case Scheme::stripe:
        return detail::verify_stripe;
    case Scheme::slack:
        return detail::verify_slack;
    case Scheme::standard:
        return detail::verify_standard;
    case Scheme::svix:
        return detail::verify_svix;
    case Scheme::shopify:
        return detail::verify_shopify;
    case Scheme::discord:
        return detail::verify_discord;
    case Scheme::twilio:
        return detail::verify_twilio;
    case Scheme::square:
        return detail::verify_square;
    case Scheme::pagerduty:
        return detail::verify_pagerduty;
    case Scheme::braintree:
        return detail::verify_braintree;
    case Scheme::hmac:
        return detail::verify_hmac;
    case Scheme::provider: // needs its spec: Verifier::verify calls it
    case Scheme::auto_detect:
        break;
    }
    return nullptr;
}
} // namespace

namespace {
std::optional<std::string> missing_provider_key(const ProviderSpec& spec,
                                                const VerifyConfig& config) {
    using Construction = ProviderSpec::Construction;
    // The kind of public key a construction checks with, and how the
    // message names it; a secret's otherwise.
    std::optional<PublicKey::Kind> kind;
    std::string_view what, how = "--public-key";
    if (spec.construction == Construction::ecdsa_p256 ||
        (spec.construction == Construction::jwt &&
         spec.jwt_algorithm == ProviderSpec::JwtAlgorithm::es256)) {
        kind = PublicKey::Kind::ecdsa_p256;
        what = "ECDSA P-256";
    } else if (spec.construction == Construction::rsa) {
        kind = PublicKey::Kind::rsa;
        what = "RSA";
        how = "--public-key (a PEM public key or certificate)";
    } else if (spec.construction == Construction::ed25519) {
        kind = PublicKey::Kind::ed25519;
        what = "ed25519";
    }
    if (kind) {
        if (std::any_of(config.public_keys.begin(), config.public_keys.end(),
                        [&](const PublicKey& key) { return key.kind == *kind; }))
            return std::nullopt;
        return fmt::format("no {} public key configured for {}: pass {}", what, spec.name, how);
    }
    if (!config.secrets.empty()) return std::nullopt;
    return fmt::format("no secret configured for {}: pass --secret, --secret-file or --secret-env",
                       spec.name);
}
} // namespace

std::optional<std::string> missing_key(Scheme scheme, const VerifyConfig& config) {
    bool has_secret = !config.secrets.empty();
    bool has_public_key = !config.public_keys.empty();
    if (scheme == Scheme::provider && config.provider < config.providers.size()) {
        const auto& spec = config.providers[config.provider];
        return spec.builtin ? missing_key(*spec.builtin, config)
                            : missing_provider_key(spec, config);
    }
    switch (scheme) {
    case Scheme::discord:
        if (has_public_key) return std::nullopt;
        return "no public key configured for discord: pass --public-key";
    case Scheme::standard:
    case Scheme::svix:
        if (has_secret || has_public_key) return std::nullopt;
        return fmt::format("no secret or public key configured for {}: pass --secret, "
                           "--secret-file, --secret-env or --public-key",
                           scheme_name(scheme));
    default:
        if (has_secret) return std::nullopt;
        return fmt::format(
            "no secret configured for {}: pass --secret, --secret-file or --secret-env",
            scheme_name(scheme));
    }
}

std::string_view verdict_scheme_name(const Verdict& verdict) {
    if (verdict.scheme == Scheme::provider && !verdict.provider.empty()) return verdict.provider;
    return scheme_name(verdict.scheme);
}

Verdict Verifier::verify(const record::Envelope& received, Timestamp now) {
    const auto& config = m_impl->config;
    // Every scheme reads a header as HTTP does: repeated lines are one list.
    const auto& envelope = m_impl->joined.join(received);
    auto scheme = config.scheme;
    const ProviderSpec* spec =
        scheme == Scheme::provider ? &config.providers.at(config.provider) : nullptr;
    if (scheme == Scheme::auto_detect) {
        auto found = detect_scheme(envelope);
        std::optional<Scheme> detected;
        if (found) detected = found->scheme;
        // The built-in schemes first: a provider file covers the others, and
        // a delivery a built-in scheme would claim by a generic header alone.
        if (!found || found->signature_alone) {
            auto claimed = detect_provider(config.providers, envelope);
            if (claimed.candidates.size() > 1) {
                std::string names;
                for (const auto* candidate : claimed.candidates)
                    names += fmt::format("{}{}", names.empty() ? "" : ", ", candidate->name);
                return detail::invalid(
                    Scheme::auto_detect,
                    fmt::format("the headers fit {} alike: cannot tell the provider (pass "
                                "--scheme)",
                                names));
            }
            if ((spec = claimed.spec)) detected = Scheme::provider;
        }
        if (!detected)
            return detail::invalid(
                Scheme::auto_detect,
                config.providers.empty()
                    ? "no known signature header: cannot tell the scheme (pass --scheme)"
                    : "no known signature header, built in or in --provider-file: cannot tell "
                      "the scheme (pass --scheme)");
        scheme = *detected;
    }
    if (spec && spec->builtin) {
        // A provider that signs as a built-in scheme: that scheme judges,
        // and the verdict names the provider.
        if (auto missing = missing_key(*spec->builtin, config)) {
            auto verdict = detail::invalid(Scheme::provider, *missing);
            verdict.provider = spec->name;
            return verdict;
        }
        detail::Input input{envelope, now, config, m_impl->keys};
        auto verdict = verifier_for(*spec->builtin)(input);
        verdict.scheme = Scheme::provider;
        verdict.provider = spec->name;
        return verdict;
    }
    if (auto missing = spec ? missing_provider_key(*spec, config) : missing_key(scheme, config)) {
        auto verdict = detail::invalid(scheme, *missing);
        if (spec) verdict.provider = spec->name;
        return verdict;
    }
    detail::Input input{envelope, now, config, m_impl->keys};
    auto verdict = spec ? detail::verify_provider(input, *spec) : verifier_for(scheme)(input);
    if (verdict.valid && m_impl->config.timestamp_check == TimestampCheck::ignore &&
        verdict.signed_at)
        verdict.reason = "signature matches (timestamp not checked)";
    return verdict;
}

} // namespace idem::verify
