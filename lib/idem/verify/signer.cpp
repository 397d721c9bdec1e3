#include "idem/verify/signer.hpp"

#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fmt/ranges.h>

namespace idem::verify {

using crypto::HashAlgorithm;

// One secret made ready to sign with: an HMAC key, or an ed25519 private
// key (discord, Standard Webhooks v1a).
struct SigningKey {
    std::optional<crypto::HmacKey> hmac;
    std::optional<crypto::Ed25519PrivateKey> private_key;
};

struct Signer::Impl {
    const VerifyConfig& config;
    Scheme scheme;
    // Every secret's key, in the order given: the schemes whose header
    // carries several signatures (stripe, standard, svix) sign with each,
    // as a rotation does; the others take exactly one.
    std::vector<SigningKey> keys;
    std::string signature_kind; // "v1 (HMAC-SHA256)", ... ; "" when the scheme has one kind

    // A provider that signs as a built-in scheme is signed as that scheme.
    explicit Impl(const VerifyConfig& c)
        : config(c), scheme(c.scheme == Scheme::provider && c.providers.at(c.provider).builtin
                                ? *c.providers.at(c.provider).builtin
                                : c.scheme) {}
    [[nodiscard]] const crypto::HmacKey& hmac() const { return *keys.front().hmac; }
    std::string mac_hex(std::initializer_list<std::string_view> parts) const {
        return hex_encode(hmac().mac(parts).view());
    }
    std::string mac_base64(std::initializer_list<std::string_view> parts) const {
        return base64_encode(hmac().mac(parts).view());
    }

    // The schemes whose headers take more than a line to make; `seconds`
    // is the signing time as Unix seconds.
    [[nodiscard]] HeaderList standard_headers(const record::Envelope& envelope,
                                              const std::string& seconds) const;
    [[nodiscard]] HeaderList url_signed_headers(const record::Envelope& envelope) const;
    [[nodiscard]] HeaderList hmac_headers(const record::Envelope& envelope,
                                          const std::string& seconds) const;
    [[nodiscard]] HeaderList provider_headers(const record::Envelope& envelope, Timestamp at,
                                              const std::string& seconds) const;
};

namespace {

std::optional<crypto::Ed25519PrivateKey> parse_private_key(std::string_view text) {
    auto seed = decode_key_text(text, "whsk_");
    // Some tools store seed and public key together (64 bytes).
    if (seed && seed->size() == 64) seed->resize(32);
    if (!seed) return std::nullopt;
    return crypto::Ed25519PrivateKey::from_seed(*seed);
}

HashAlgorithm signing_algorithm(const VerifyConfig& config, Scheme scheme) {
    switch (scheme) {
    case Scheme::twilio:
        return HashAlgorithm::sha1;
    case Scheme::hmac:
        return config.hmac.algorithm;
    case Scheme::provider:
        return config.providers.at(config.provider).algorithm;
    default:
        return HashAlgorithm::sha256;
    }
}

bool carries_several_signatures(Scheme scheme) {
    return scheme == Scheme::stripe || scheme == Scheme::standard || scheme == Scheme::svix;
}

} // namespace

Signer::Signer(const VerifyConfig& config) : m_impl(std::make_unique<Impl>(config)) {
    auto& impl = *m_impl;
    if (impl.scheme == Scheme::auto_detect)
        throw UsageError(
            "idem sign needs --scheme: there are no signature headers to detect it from");
    if (config.secrets.empty())
        throw UsageError(
            fmt::format("signing with {} needs --secret (or --secret-file, --secret-env)",
                        scheme_name(impl.scheme)));
    if (config.secrets.size() > 1 && !carries_several_signatures(impl.scheme))
        throw UsageError(fmt::format(
            "{} secrets given, but a {} delivery carries one signature: give one (stripe, "
            "standard and svix carry several, and are signed with each)",
            config.secrets.size(), scheme_name(impl.scheme)));
    bool standard_family = impl.scheme == Scheme::standard || impl.scheme == Scheme::svix;
    for (const auto& secret : config.secrets) {
        std::string_view value = secret.value;
        // 64 hex digits read as base64 too: signed as v1 (HMAC), a key meant
        // as an ed25519 seed would give signatures nobody can check. The
        // prefix decides, and without one the ambiguity is refused.
        if (standard_family && !value.starts_with("whsec_") && !value.starts_with("whsk_") &&
            value.size() == 64 && is_hex(value))
            throw UsageError(fmt::format("secret {} is 64 hex digits: an ed25519 seed (v1a) or "
                                         "base64 HMAC key material (v1)? Say which: "
                                         "whsk_<base64 seed> signs v1a, whsec_<base64> signs v1",
                                         secret.label));
        bool ed25519 =
            impl.scheme == Scheme::discord || (standard_family && value.starts_with("whsk_"));
        if (impl.keys.empty())
            impl.signature_kind = impl.scheme == Scheme::discord ? "ed25519"
                                  : ed25519                      ? "v1a (ed25519)"
                                  : standard_family              ? "v1 (HMAC-SHA256)"
                                                                 : "";
        auto& key = impl.keys.emplace_back();
        if (ed25519) {
            key.private_key = parse_private_key(secret.value);
            if (!key.private_key)
                throw UsageError(fmt::format("secret {} is not an ed25519 private key: expected "
                                             "whsk_<base64> or a 32-byte seed in hex or base64",
                                             secret.label));
            continue;
        }
        auto derivation = standard_family ? detail::KeyDerivation::standard_base64
                          : impl.scheme == Scheme::provider
                              ? detail::key_derivation(config.providers.at(config.provider))
                              : detail::KeyDerivation::raw;
        auto bytes = detail::derive_key(secret, derivation);
        detail::require_key_bytes(secret, bytes);
        key.hmac.emplace(signing_algorithm(config, impl.scheme), bytes);
        crypto::cleanse(bytes); // the HMAC states hold it from here
    }
}

Signer::~Signer() = default;

std::string_view Signer::signature_kind() const {
    return m_impl->signature_kind;
}

// Standard Webhooks and Svix: the message id (the capture's, else one made
// from the body), the time, and a space-separated list of signatures, one
// per secret (v1a for an ed25519 key).
HeaderList Signer::Impl::standard_headers(const record::Envelope& envelope,
                                          const std::string& seconds) const {
    auto body = envelope.body;
    auto names = detail::standard_header_names(scheme);
    std::string id(envelope.header(names.id).value_or(envelope.id));
    if (id.empty())
        id = "msg_" + hex_encode(crypto::hash(HashAlgorithm::sha256, body).view()).substr(0, 24);
    std::string signature;
    for (const auto& key : keys) {
        if (!signature.empty()) signature += ' ';
        if (key.private_key) {
            std::string message = fmt::format("{}.{}.", id, seconds);
            message.append(body);
            signature += "v1a," + base64_encode(key.private_key->sign(message));
        } else {
            signature += "v1," + base64_encode(key.hmac->mac({id, ".", seconds, ".", body}).view());
        }
    }
    return {{std::string(names.id), id},
            {std::string(names.timestamp), seconds},
            {std::string(names.signature), signature}};
}

// Twilio and Square sign the URL the delivery was sent to.
HeaderList Signer::Impl::url_signed_headers(const record::Envelope& envelope) const {
    auto body = envelope.body;
    auto url = detail::signed_url(config, envelope);
    if (!url)
        throw UsageError(
            fmt::format("signing with {} needs --url or --url-base", scheme_name(scheme)));
    if (scheme == Scheme::square)
        return {{"X-Square-HmacSha256-Signature", mac_base64({*url, body})}};
    std::string suffix;
    auto type = envelope.header("Content-Type");
    if (!detail::query_parameter(*url, "bodySHA256") && type &&
        type->starts_with("application/x-www-form-urlencoded"))
        suffix = detail::twilio_form_suffix(body);
    return {{"X-Twilio-Signature", mac_base64({*url, suffix})}};
}

// --scheme hmac: the generic spec's message, header and prefix.
HeaderList Signer::Impl::hmac_headers(const record::Envelope& envelope,
                                      const std::string& seconds) const {
    const auto& spec = config.hmac;
    std::string id(spec.id_header.empty() ? ""
                                          : envelope.header(spec.id_header).value_or(envelope.id));
    auto message = detail::generic_hmac_message(spec, envelope.body, seconds, id);
    auto mac = hmac().mac({message});
    auto encoded = detail::encode_signature(mac.view(), spec.encoding);
    HeaderList headers{{spec.header, spec.prefix + encoded}};
    if (!spec.timestamp_header.empty()) headers.emplace_back(spec.timestamp_header, seconds);
    if (!spec.id_header.empty() && !envelope.header(spec.id_header))
        headers.emplace_back(spec.id_header, id);
    return headers;
}

namespace {
// RFC 3339 with as many fraction digits as `at` needs (none, 3 or 6):
// "2021-08-17T20:28:32Z" for a whole second, as Zendesk writes its own.
std::string rfc3339_as_precise_as(Timestamp at) {
    auto text = format_rfc3339(at); // "...:SS.mmmZ"
    auto micros = std::chrono::duration_cast<std::chrono::microseconds>(at.time_since_epoch());
    auto below_milli = ((micros.count() % 1000) + 1000) % 1000;
    if (below_milli != 0) {
        text.pop_back();
        return text + fmt::format("{:03}Z", below_milli);
    }
    if (text.ends_with(".000Z")) text.replace(text.size() - 5, 5, "Z");
    return text;
}
} // namespace

// A provider spec: the same message the verifier checks
// (provider_message), with the timestamp in the spec's unit, and the
// headers its `detect:` names, so that --scheme auto finds it.
HeaderList Signer::Impl::provider_headers(const record::Envelope& envelope, Timestamp at,
                                          const std::string& seconds) const {
    const auto& spec = config.providers.at(config.provider);
    if (!spec.signature_path.empty() || !spec.signature_form_field.empty())
        throw UsageError(fmt::format("provider {} signs inside the body ({}): idem sign writes "
                                     "headers and leaves the body as it is",
                                     spec.name,
                                     spec.signature_form_field.empty()
                                         ? fmt::format("{}", fmt::join(spec.signature_path, "."))
                                         : spec.signature_form_field));
    if (spec.construction == ProviderSpec::Construction::ecdsa_p256 ||
        spec.construction == ProviderSpec::Construction::ed25519 ||
        spec.construction == ProviderSpec::Construction::rsa ||
        spec.construction == ProviderSpec::Construction::jwt)
        throw UsageError(fmt::format("provider {} signs {}: idem verifies its deliveries but "
                                     "cannot make them",
                                     spec.name,
                                     spec.construction == ProviderSpec::Construction::jwt
                                         ? "a JSON Web Token"
                                     : spec.construction == ProviderSpec::Construction::rsa
                                         ? "with its own private key (RSA)"
                                     : spec.construction == ProviderSpec::Construction::ed25519
                                         ? "with its own private key (ed25519)"
                                         : "with its own private key (ECDSA)"));
    using Unit = ProviderSpec::TimestampUnit;
    detail::BodyMembers members(envelope.body);
    std::string stamp = spec.timestamp_unit == Unit::milliseconds
                            ? std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 at.time_since_epoch())
                                                 .count())
                        : spec.timestamp_unit == Unit::rfc3339   ? rfc3339_as_precise_as(at)
                        : spec.timestamp_unit == Unit::http_date ? format_http_date(at)
                                                                 : seconds;
    if (!spec.timestamp_path.empty()) {
        // The provider put the time in the body: it is signed as it is there.
        auto in_body = members.text(spec.timestamp_path);
        if (!in_body)
            throw UsageError(fmt::format("provider {} takes its timestamp from the body's {}: "
                                         "the event has none",
                                         spec.name, fmt::join(spec.timestamp_path, ".")));
        stamp = *in_body;
    }
    std::string id(spec.id_header.empty() ? ""
                                          : envelope.header(spec.id_header).value_or(envelope.id));
    std::string url;
    if (detail::message_signs_url(spec)) {
        auto signed_at_url = detail::signed_url(config, envelope);
        if (!signed_at_url)
            throw UsageError(
                fmt::format("provider {} signs the URL: pass --url or --url-base", spec.name));
        url = std::move(*signed_at_url);
    }
    for (const auto& part : spec.request_parts)
        if (!detail::request_part(part, envelope))
            throw UsageError(fmt::format(
                "provider {} signs the request's {} {}: the event has none", spec.name,
                part.from == ProviderSpec::RequestPart::From::header ? "header" : "query parameter",
                quote(part.name, 40)));
    std::string encoded;
    const auto& secret = config.secrets.front().value;
    if (spec.construction == ProviderSpec::Construction::token) {
        // The provider sends the shared secret itself.
        encoded = spec.token_base64 ? base64_encode(secret) : secret;
    } else {
        auto message =
            detail::provider_message(spec, envelope, members, stamp, id, url, config.params);
        auto mac = spec.construction == ProviderSpec::Construction::digest
                       ? crypto::hash(spec.algorithm,
                                      spec.secret_last ? message + secret : secret + message)
                       : hmac().mac({message});
        encoded = detail::encode_signature(mac.view(), spec.encoding);
    }
    HeaderList headers;
    auto between =
        spec.separator_text.empty() ? std::string(1, spec.separator) : spec.separator_text;
    if (spec.positional && !spec.positional_timestamp) {
        headers.emplace_back(spec.signature_header, spec.prefix + encoded);
    } else if (spec.positional) {
        headers.emplace_back(spec.signature_header,
                             fmt::format("{}{}{}{}", stamp, between, spec.prefix, encoded));
    } else if (spec.separator) {
        std::string value;
        if (!spec.timestamp_key.empty())
            value = fmt::format("{}{}{}{}", spec.timestamp_key, spec.key_separator, stamp, between);
        value +=
            fmt::format("{}{}{}{}", spec.signature_key, spec.key_separator, spec.prefix, encoded);
        headers.emplace_back(spec.signature_header, value);
    } else {
        headers.emplace_back(spec.signature_header, spec.prefix + encoded);
    }
    if (!spec.timestamp_header.empty()) headers.emplace_back(spec.timestamp_header, stamp);
    if (!spec.id_header.empty() && !envelope.header(spec.id_header) && !id.empty())
        headers.emplace_back(spec.id_header, id);
    // What the provider's SDK requires (Box's signature version) goes with
    // it, so that what sign makes verify accepts.
    for (const auto& required : spec.require) {
        if (envelope.header(required.name)) continue;
        auto value = detail::required_value(config, required.values.front());
        if (!value) {
            auto param = ProviderSpec::required_param(required.values.front());
            throw UsageError(fmt::format("provider {} requires header '{}' to be the {} you "
                                         "give: pass --param {}=VALUE",
                                         spec.name, required.name, param, param));
        }
        headers.emplace_back(required.name, *value);
    }
    for (const auto& wanted : spec.detect)
        if (wanted.name != spec.signature_header && wanted.name != spec.timestamp_header &&
            wanted.name != spec.id_header && !envelope.header(wanted.name) &&
            std::none_of(headers.begin(), headers.end(),
                         [&](const auto& added) { return added.first == wanted.name; }))
            headers.emplace_back(wanted.name, wanted.value.empty() ? "idem-sign" : wanted.value);
    return headers;
}

HeaderList Signer::signature_headers(const record::Envelope& envelope, Timestamp at) const {
    const auto& impl = *m_impl;
    auto body = envelope.body;
    auto seconds = std::to_string(
        std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count());
    switch (impl.scheme) {
    case Scheme::github:
        return {{"X-Hub-Signature-256", "sha256=" + impl.mac_hex({body})}};
    case Scheme::stripe: {
        // t=...,v1=...,v1=...: one v1 per secret (Stripe's own form while a
        // secret is rolled).
        auto value = fmt::format("t={}", seconds);
        for (const auto& key : impl.keys)
            value += ",v1=" + hex_encode(key.hmac->mac({seconds, ".", body}).view());
        return {{"Stripe-Signature", value}};
    }
    case Scheme::slack:
        return {{"X-Slack-Request-Timestamp", seconds},
                {"X-Slack-Signature", "v0=" + impl.mac_hex({"v0:", seconds, ":", body})}};
    case Scheme::standard:
    case Scheme::svix:
        return impl.standard_headers(envelope, seconds);
    case Scheme::shopify:
        return {{"X-Shopify-Hmac-Sha256", impl.mac_base64({body})}};
    case Scheme::discord: {
        std::string message = seconds;
        message.append(body);
        return {{"X-Signature-Ed25519", hex_encode(impl.keys.front().private_key->sign(message))},
                {"X-Signature-Timestamp", seconds}};
    }
    case Scheme::twilio:
    case Scheme::square:
        return impl.url_signed_headers(envelope);
    case Scheme::pagerduty:
        return {{"X-PagerDuty-Signature", "v1=" + impl.mac_hex({body})}};
    case Scheme::braintree:
        throw UsageError("braintree signs inside the form body (bt_signature, bt_payload): idem "
                         "sign writes headers and leaves the body as it is");
    case Scheme::hmac:
        return impl.hmac_headers(envelope, seconds);
    case Scheme::provider:
        return impl.provider_headers(envelope, at, seconds);
    case Scheme::auto_detect:
        break;
    }
    return {};
}

} // namespace idem::verify
