#include "idem/verify/verifier.hpp"

#include "idem/verify/detail/schemes.hpp"

namespace idem::verify {

struct Verifier::Impl {
    const VerifyConfig& config;
    detail::KeyRing keys;
    explicit Impl(const VerifyConfig& c) : config(c), keys(c) {}
};

Verifier::Verifier(const VerifyConfig& config) : m_impl(std::make_unique<Impl>(config)) {}
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
    case Scheme::hmac:
        return detail::verify_hmac;
    case Scheme::auto_detect:
        break;
    }
    return nullptr;
}
} // namespace

Verdict Verifier::verify(const record::Envelope& envelope, Timestamp now) {
    auto scheme = m_impl->config.scheme;
    if (scheme == Scheme::auto_detect) {
        auto detected = detect_scheme(envelope);
        if (!detected)
            return detail::invalid(
                Scheme::auto_detect,
                "no known signature header: cannot tell the scheme (pass --scheme)");
        scheme = *detected;
    }
    detail::Input input{envelope, now, m_impl->config, m_impl->keys};
    auto verdict = verifier_for(scheme)(input);
    if (verdict.valid && m_impl->config.timestamp_check == TimestampCheck::ignore &&
        verdict.signed_at)
        verdict.reason = "signature matches (timestamp not checked)";
    return verdict;
}

} // namespace idem::verify
