#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fmt/format.h>
#include <optional>

namespace idem::verify::detail {

KeyRing::KeyRing(const VerifyConfig& config) : m_config(config) {}

std::string derive_key(const Secret& secret, KeyDerivation derivation) {
    switch (derivation) {
    case KeyDerivation::standard_base64:
        return standard_webhooks_key(secret);
    case KeyDerivation::base64:
        return base64_key(secret);
    case KeyDerivation::hex:
        return hex_key(secret);
    case KeyDerivation::whsec_or_text:
        // whsec_<base64> is decoded; any other secret keys as its text (OpenAI's SDK).
        if (secret.value.starts_with("whsec_")) return standard_webhooks_key(secret);
        break;
    case KeyDerivation::nfkd:
        if (auto normalized = nfkd(secret.value)) return *normalized;
        throw UsageError(
            fmt::format("secret {} is not UTF-8 text: it cannot be NFKD-normalised", secret.label));
    case KeyDerivation::sha1_digest: {
        // Braintree keys its HMAC by the SHA-1 digest of the private key.
        auto digest = crypto::hash(crypto::HashAlgorithm::sha1, secret.value);
        return std::string(digest.view());
    }
    case KeyDerivation::raw:
        break;
    }
    return secret.value;
}

void require_key_bytes(const Secret& secret, std::string_view key) {
    if (key.empty())
        throw UsageError(fmt::format("secret {} decodes to no bytes, and an HMAC key of none is "
                                     "one anybody holds: is the variable after its prefix "
                                     "unset (whsec_${{UNSET}})?",
                                     secret.label));
}

KeyDerivation key_derivation(const ProviderSpec& spec) {
    switch (spec.secret_form) {
    case ProviderSpec::SecretForm::base64:
        return KeyDerivation::base64;
    case ProviderSpec::SecretForm::hex:
        return KeyDerivation::hex;
    case ProviderSpec::SecretForm::whsec_or_text:
        return KeyDerivation::whsec_or_text;
    case ProviderSpec::SecretForm::raw:
        break;
    }
    return spec.secret_nfkd ? KeyDerivation::nfkd : KeyDerivation::raw;
}

const std::vector<PreparedKey>& KeyRing::hmac(KeyDerivation derivation,
                                              crypto::HashAlgorithm algorithm, Scheme scheme) {
    auto slot = std::make_pair(derivation, algorithm);
    auto found = m_hmac.find(slot);
    if (found != m_hmac.end()) return found->second;
    if (m_config.secrets.empty())
        throw UsageError(
            fmt::format("scheme {} needs a secret: pass --secret, --secret-file or --secret-env",
                        scheme_name(scheme)));
    // Several secrets may be several providers' (one log, auto): one that
    // cannot be this provider's key (not base64 where it must be) is not
    // this provider's, and is left out; only when none can be is that an
    // error.
    std::vector<PreparedKey> keys;
    std::optional<UsageError> misfit;
    for (const auto& secret : m_config.secrets) {
        std::string key;
        try {
            key = derivation == KeyDerivation::standard_base64 &&
                          m_config.standard_key != StandardKey::decoded
                      ? std::string(m_config.standard_key == StandardKey::text_after_prefix &&
                                            secret.value.starts_with("whsec_")
                                        ? std::string_view(secret.value).substr(6)
                                        : std::string_view(secret.value))
                      : derive_key(secret, derivation);
        } catch (const UsageError& error) {
            if (!misfit) misfit = error;
            continue;
        }
        require_key_bytes(secret, key); // whichever provider it is meant for
        keys.push_back({secret.label, crypto::HmacKey(algorithm, key)});
        crypto::cleanse(key); // the HMAC states hold it from here
    }
    if (keys.empty() && misfit) throw *misfit;
    return m_hmac.emplace(slot, std::move(keys)).first->second;
}

namespace {
// The --public-key keys of `kind`, each made ready by `prepare` (nullopt:
// not a valid `what` key, refused by its label); `none` is refused when
// there is not one.
template <typename Named, typename Prepare>
std::vector<Named> ready_public_keys(const VerifyConfig& config, PublicKey::Kind kind,
                                     std::string_view what, Prepare prepare,
                                     const std::string& none) {
    std::vector<Named> keys;
    for (const auto& key : config.public_keys) {
        if (key.kind != kind) continue;
        auto ready = prepare(key.raw);
        if (!ready)
            throw UsageError(fmt::format("public key {} is not a valid {} key", key.label, what));
        keys.push_back({key.label, std::move(*ready)});
    }
    if (keys.empty()) throw UsageError(none);
    return keys;
}
} // namespace

const std::vector<NamedPublicKey>& KeyRing::ed25519(Scheme scheme) {
    if (m_ed25519) return *m_ed25519;
    if (m_config.public_keys.empty())
        throw UsageError(fmt::format("scheme {} checks ed25519 signatures: pass --public-key",
                                     scheme_name(scheme)));
    m_ed25519 = ready_public_keys<NamedPublicKey>(
        m_config, PublicKey::Kind::ed25519, "ed25519", crypto::Ed25519PublicKey::from_raw,
        fmt::format("scheme {} checks ed25519 signatures: pass an ed25519 --public-key",
                    scheme_name(scheme)));
    return *m_ed25519;
}

const std::vector<NamedRsaKey>& KeyRing::rsa(std::string_view provider) {
    if (!m_rsa)
        m_rsa = ready_public_keys<NamedRsaKey>(
            m_config, PublicKey::Kind::rsa, "RSA", crypto::RsaPublicKey::from_der,
            fmt::format("provider {} checks RSA signatures: pass its public key or certificate "
                        "with --public-key",
                        provider));
    return *m_rsa;
}

const std::vector<NamedEcdsaKey>& KeyRing::ecdsa_p256(std::string_view provider) {
    if (!m_ecdsa_p256)
        m_ecdsa_p256 = ready_public_keys<NamedEcdsaKey>(
            m_config, PublicKey::Kind::ecdsa_p256, "P-256", crypto::EcdsaP256PublicKey::from_der,
            fmt::format("provider {} checks ECDSA P-256 signatures: pass its public key with "
                        "--public-key",
                        provider));
    return *m_ecdsa_p256;
}

Verdict invalid(Scheme scheme, std::string reason) {
    Verdict verdict;
    verdict.valid = false;
    verdict.scheme = scheme;
    verdict.reason = std::move(reason);
    return verdict;
}

std::string signed_content_nonce(std::initializer_list<std::string_view> signed_content) {
    crypto::Sha256Stream digest;
    for (auto part : signed_content)
        digest.update(part);
    auto bytes = digest.finish();
    return "sha256:" + encode_signature(bytes.view(), SignatureEncoding::hex);
}

Verdict matched(const Input& input, Scheme scheme, std::string label, std::string_view message_id,
                std::optional<Timestamp> signed_at,
                std::initializer_list<std::string_view> signed_content) {
    Verdict verdict;
    verdict.valid = true;
    verdict.scheme = scheme;
    verdict.key_label = std::move(label);
    verdict.reason = "signature matches";
    if (input.config.nonce_capture == NonceCapture::keep) {
        verdict.message_id = message_id;
        verdict.nonce = signed_content_nonce(signed_content);
    }
    verdict.signed_at = signed_at;
    return verdict;
}

namespace {
bool all_base64(std::string_view text) {
    while (!text.empty() && text.back() == '=')
        text.remove_suffix(1);
    return text.size() % 4 != 1 && std::all_of(text.begin(), text.end(), [](char c) {
               return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '/' ||
                      c == '-' || c == '_';
           });
}
std::size_t base64_decoded_size(std::string_view text) {
    while (!text.empty() && text.back() == '=')
        text.remove_suffix(1);
    return text.size() * 3 / 4;
}
} // namespace

Decoded decode_signature(std::string_view text, SignatureEncoding encoding,
                         std::size_t expected_bytes, std::string_view what) {
    Decoded decoded;
    text = trim(text);
    SignatureBytes signature;
    if (encoding == SignatureEncoding::hex) {
        // The common case first: a well-formed signature decodes in one pass.
        if (text.size() == expected_bytes * 2)
            if (auto size = hex_decode_to(text, signature.bytes.data(), signature.bytes.size())) {
                signature.size = *size;
                decoded.bytes = signature;
                return decoded;
            }
        if (!is_hex(text)) {
            decoded.problem = fmt::format("{} is not hex", what);
        } else if (text.size() != expected_bytes * 2) {
            decoded.problem = fmt::format("{} has the wrong length: expected {} hex digits, got {}",
                                          what, expected_bytes * 2, text.size());
        } else if (auto size =
                       hex_decode_to(text, signature.bytes.data(), signature.bytes.size())) {
            signature.size = *size;
            decoded.bytes = signature;
        }
        return decoded;
    }
    if (!all_base64(text)) {
        decoded.problem = fmt::format("{} is not base64", what);
    } else if (base64_decoded_size(text) != expected_bytes) {
        decoded.problem = fmt::format("{} has the wrong length: expected {} bytes, got {}", what,
                                      expected_bytes, base64_decoded_size(text));
    } else if (auto size = base64_decode_to(text, signature.bytes.data(), signature.bytes.size())) {
        signature.size = *size;
        decoded.bytes = signature;
    }
    return decoded;
}

std::string encode_signature(std::string_view bytes, SignatureEncoding encoding) {
    switch (encoding) {
    case SignatureEncoding::hex:
        return hex_encode(bytes);
    case SignatureEncoding::base64:
        return base64_encode(bytes);
    case SignatureEncoding::base64url:
        return base64url_encode(bytes);
    }
    return hex_encode(bytes);
}

DecodedSet decode_all(const SignatureTexts& texts, SignatureEncoding encoding,
                      std::size_t expected_bytes, std::string_view what) {
    DecodedSet set;
    for (auto text : texts) {
        auto decoded = decode_signature(text, encoding, expected_bytes, what);
        if (decoded.bytes)
            set.signatures.push_back(*decoded.bytes);
        else if (set.problem.empty())
            set.problem = std::move(decoded.problem);
    }
    return set;
}

std::optional<std::string> match_hmac(const std::vector<PreparedKey>& keys,
                                      const SignatureSet& candidates,
                                      std::initializer_list<std::string_view> parts) {
    for (const auto& key : keys) {
        auto digest = key.key.mac(parts);
        for (const auto& candidate : candidates)
            if (crypto::constant_time_equal(digest.view(), candidate.view())) return key.label;
    }
    return std::nullopt;
}

std::optional<Timestamp> parse_unix_seconds(std::string_view text) {
    text = trim(text);
    long long seconds = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (error != std::errc{} || end != text.data() + text.size() || text.empty())
        return std::nullopt;
    if (seconds < 0 || seconds > 253402300799LL) return std::nullopt; // up to year 9999
    return Timestamp(std::chrono::seconds(seconds));
}

std::optional<Timestamp> parse_signed_time(const VerifyConfig& config, std::string_view text) {
    if (config.timestamp_unit == TimestampUnit::seconds) return parse_unix_seconds(text);
    text = trim(text);
    long long millis = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), millis);
    if (error != std::errc{} || end != text.data() + text.size() || text.empty() || millis < 0 ||
        millis > 253402300799999LL)
        return std::nullopt;
    return Timestamp(std::chrono::milliseconds(millis));
}

std::optional<std::string> check_age(const Input& input, Timestamp signed_at, ClockSides sides,
                                     std::optional<Duration> provider_tolerance) {
    if (input.config.timestamp_check == TimestampCheck::ignore) return std::nullopt;
    auto tolerance = provider_tolerance && !input.config.tolerance_given ? *provider_tolerance
                                                                         : input.config.tolerance;
    auto age = input.now - signed_at;
    if (age > tolerance)
        return fmt::format("timestamp {} is {} old, beyond the {} tolerance",
                           format_rfc3339(signed_at),
                           format_duration(std::chrono::duration_cast<std::chrono::seconds>(age)),
                           format_duration(tolerance));
    if (sides == ClockSides::both && -age > tolerance)
        return fmt::format("timestamp {} is {} in the future, beyond the {} tolerance",
                           format_rfc3339(signed_at),
                           format_duration(std::chrono::duration_cast<std::chrono::seconds>(-age)),
                           format_duration(tolerance));
    return std::nullopt;
}

std::string no_match_reason(std::size_t keys, std::size_t candidates) {
    return fmt::format("signature does not match: {} signature{} checked against {} key{}",
                       candidates, candidates == 1 ? "" : "s", keys, keys == 1 ? "" : "s");
}

std::string_view list_item(std::string_view item) {
    item = trim(item);
    while (!item.empty() && item.back() == ',')
        item = trim(item.substr(0, item.size() - 1));
    return item;
}

std::string missing_header(std::string_view name) {
    return fmt::format("missing header '{}'", name);
}

std::optional<std::string> signed_url(const VerifyConfig& config,
                                      const record::Envelope& envelope) {
    if (!config.url.empty()) return config.url;
    if (config.url_base.empty()) return std::nullopt;
    std::string base = config.url_base;
    while (!base.empty() && base.back() == '/')
        base.pop_back();
    std::string path(envelope.path.empty() ? "/" : envelope.path);
    if (path.front() != '/') path.insert(path.begin(), '/');
    return base + path;
}

} // namespace idem::verify::detail
