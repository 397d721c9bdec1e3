#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/config.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::verify {

namespace {

bool is_label(std::string_view text) {
    if (text.empty() || text.size() > 64) return false;
    for (char c : text)
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.'))
            return false;
    return true;
}

// Public keys are not secrets: "label=KEY" is split when the part before
// the '=' is a label and the rest does not start with '=' (base64 padding).
std::pair<std::string, std::string_view> split_label(std::string_view text, std::size_t position) {
    std::string label = fmt::format("#{}", position);
    if (!text.empty() && text.front() == '=') return {label, text.substr(1)};
    auto equals = text.find('=');
    if (equals != std::string_view::npos && is_label(text.substr(0, equals))) {
        auto rest = text.substr(equals + 1);
        if (!rest.empty() && rest.front() != '=')
            return {std::string(text.substr(0, equals)), rest};
    }
    return {label, text};
}

} // namespace

Secret make_secret(std::string value, std::string label) {
    if (value.empty()) throw UsageError(fmt::format("secret {} is empty", label));
    return {std::move(label), std::move(value)};
}

LabelledReference parse_labelled_reference(std::string_view text) {
    auto equals = text.find('=');
    if (equals != std::string_view::npos && is_label(text.substr(0, equals)) &&
        equals + 1 < text.size())
        return {std::string(text.substr(0, equals)), std::string(text.substr(equals + 1))};
    return {"", std::string(text)};
}

std::vector<Secret> parse_secret_lines(std::string_view text, const std::string& label) {
    std::vector<std::pair<std::size_t, std::string_view>> lines;
    std::size_t number = 0;
    for (auto line : split(text, '\n')) {
        ++number;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!line.empty()) lines.emplace_back(number, line);
    }
    std::vector<Secret> secrets;
    for (const auto& [line_number, line] : lines)
        secrets.push_back(
            make_secret(std::string(line),
                        lines.size() == 1 ? label : fmt::format("{}:{}", label, line_number)));
    return secrets;
}

std::optional<std::string> decode_key_text(std::string_view text, std::string_view prefix) {
    if (text.starts_with(prefix)) return base64_decode(text.substr(prefix.size()));
    if (text.size() == 64 && is_hex(text)) return hex_decode(text);
    return base64_decode(text);
}

namespace {
// The bytes base64 key material spells, "whsec_" first or not.
std::optional<std::string> whsec_bytes(std::string_view encoded) {
    if (encoded.starts_with("whsec_")) encoded.remove_prefix(6);
    return base64_decode(encoded);
}
} // namespace

namespace {
// The decoded key, its buffer wiped where it was.
std::string take_key(std::string& decoded) {
    std::string key = std::move(decoded);
    crypto::cleanse(decoded);
    return key;
}
} // namespace

std::string standard_webhooks_key(const Secret& secret) {
    auto decoded = whsec_bytes(secret.value);
    if (!decoded)
        throw UsageError(fmt::format("secret {} is not a Standard Webhooks secret: expected whsec_ "
                                     "followed by base64",
                                     secret.label));
    return take_key(*decoded);
}

std::string base64_key(const Secret& secret) {
    auto decoded = whsec_bytes(secret.value);
    if (!decoded)
        throw UsageError(fmt::format(
            "secret {} is not base64: this provider's key is the bytes its secret spells in base64",
            secret.label));
    return take_key(*decoded);
}

std::string hex_key(const Secret& secret) {
    auto decoded = hex_decode(secret.value);
    if (!decoded || decoded->empty())
        throw UsageError(fmt::format(
            "secret {} is not hex: this provider's key is the bytes its secret spells in hex",
            secret.label));
    return take_key(*decoded);
}

namespace {
// A PEM block's base64, its armour and line breaks gone; `certificate`
// says it was a CERTIFICATE block, not a PUBLIC KEY one.
std::string without_pem_armour(std::string_view text, bool& certificate) {
    text = trim(text);
    for (std::string_view kind : {"PUBLIC KEY", "CERTIFICATE"}) {
        auto begin = fmt::format("-----BEGIN {}-----", kind);
        auto end = fmt::format("-----END {}-----", kind);
        if (!text.starts_with(begin) || !text.ends_with(end)) continue;
        certificate = kind == "CERTIFICATE";
        text = text.substr(begin.size(), text.size() - begin.size() - end.size());
        std::string base64;
        for (char c : text)
            if (c != '\n' && c != '\r' && c != ' ' && c != '\t') base64 += c;
        return base64;
    }
    return std::string(text);
}
} // namespace

namespace {
// A JWK of an EC P-256 key ({"kty":"EC","crv":"P-256","x":...,"y":...}, as
// Plaid's webhook_verification_key/get returns it) as the DER
// SubjectPublicKeyInfo OpenSSL reads: the fixed P-256 prefix, then the
// uncompressed point 04 || x || y.
std::optional<std::string> jwk_p256_der(std::string_view text) {
    auto jwk = nlohmann::json::parse(text, nullptr, false);
    if (jwk.is_object() && jwk.contains("key") && jwk["key"].is_object()) jwk = jwk["key"];
    if (!jwk.is_object() || jwk.value("kty", "") != "EC" || jwk.value("crv", "") != "P-256" ||
        !jwk.contains("x") || !jwk.contains("y") || !jwk["x"].is_string() || !jwk["y"].is_string())
        return std::nullopt;
    auto x = base64_decode(jwk["x"].get<std::string>());
    auto y = base64_decode(jwk["y"].get<std::string>());
    if (!x || !y || x->size() != 32 || y->size() != 32) return std::nullopt;
    auto der = hex_decode("3059301306072a8648ce3d020106082a8648ce3d030107034200");
    if (!der) return std::nullopt;
    der->push_back('\x04');
    *der += *x;
    *der += *y;
    return der;
}
} // namespace

PublicKey parse_public_key(std::string_view text, std::size_t position) {
    if (trim(text).starts_with('{')) {
        // A JWK is JSON, no LABEL=: it is named by its position.
        auto der = jwk_p256_der(trim(text));
        if (der)
            if (auto weakness = crypto::public_key_weakness(*der))
                throw UsageError(
                    fmt::format("--public-key #{} is refused: {}", position, *weakness));
        if (der && crypto::EcdsaP256PublicKey::from_der(*der))
            return {fmt::format("#{}", position), *der, PublicKey::Kind::ecdsa_p256};
        throw UsageError(fmt::format("public key #{} is JSON but no EC P-256 JWK (kty EC, crv "
                                     "P-256, x and y of 32 bytes each)",
                                     position));
    }
    auto [label, value] = split_label(text, position);
    bool certificate = false;
    auto raw = decode_key_text(without_pem_armour(value, certificate), "whpk_");
    if (raw && certificate) raw = crypto::certificate_public_key(*raw);
    if (raw)
        if (auto weakness = crypto::public_key_weakness(*raw))
            throw UsageError(fmt::format("--public-key {} is refused: {}", label, *weakness));
    if (raw && raw->size() == crypto::k_ed25519_key_bytes)
        return {label, *raw, PublicKey::Kind::ed25519};
    if (raw && crypto::EcdsaP256PublicKey::from_der(*raw))
        return {label, *raw, PublicKey::Kind::ecdsa_p256};
    if (raw && crypto::RsaPublicKey::from_der(*raw)) return {label, *raw, PublicKey::Kind::rsa};
    throw UsageError(fmt::format(
        "public key {} is neither an ed25519 public key (64 hex digits, 32 bytes of base64, or "
        "whpk_<base64>) nor an ECDSA P-256 one (its DER SubjectPublicKeyInfo in base64, or PEM) "
        "nor an RSA one of 2048 bits or more (PEM, or an X.509 certificate's PEM)",
        label));
}

crypto::HashAlgorithm parse_hash_algorithm(std::string_view name) {
    if (iequals(name, "sha1")) return crypto::HashAlgorithm::sha1;
    if (iequals(name, "sha256")) return crypto::HashAlgorithm::sha256;
    if (iequals(name, "sha512")) return crypto::HashAlgorithm::sha512;
    throw UsageError(fmt::format("unknown algorithm {}: use sha1, sha256 or sha512", quote(name)));
}

std::string_view encoding_name(SignatureEncoding encoding) {
    switch (encoding) {
    case SignatureEncoding::base64:
        return "base64";
    case SignatureEncoding::base64url:
        return "base64url";
    case SignatureEncoding::hex:
        break;
    }
    return "hex";
}

SignatureEncoding parse_signature_encoding(std::string_view name) {
    if (iequals(name, "hex")) return SignatureEncoding::hex;
    if (iequals(name, "base64")) return SignatureEncoding::base64;
    if (iequals(name, "base64url")) return SignatureEncoding::base64url;
    throw UsageError(fmt::format("unknown encoding {}: use hex, base64 or base64url", quote(name)));
}

} // namespace idem::verify
