// Standard Webhooks (and Svix, the same scheme under svix- headers), whose
// signatures are HMAC-SHA256 ("v1") or ed25519 ("v1a"), and Discord (ed25519).

#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <fmt/format.h>

namespace idem::verify::detail {

StandardHeaders standard_header_names(Scheme scheme) {
    if (scheme == Scheme::svix) return {"svix-id", "svix-timestamp", "svix-signature"};
    return {"webhook-id", "webhook-timestamp", "webhook-signature"};
}

namespace {

Verdict verify_standard_family(Input& input, Scheme scheme) {
    const auto& envelope = input.envelope;
    auto names = standard_header_names(scheme);
    // A delivery may carry the other family's headers; accept them.
    if (!envelope.header(names.signature)) {
        auto other =
            standard_header_names(scheme == Scheme::svix ? Scheme::standard : Scheme::svix);
        if (envelope.header(other.signature)) names = other;
    }
    auto id = envelope.header(names.id);
    auto timestamp_text = envelope.header(names.timestamp);
    auto signatures = envelope.header(names.signature);
    if (!signatures) return invalid(scheme, missing_header(names.signature));
    if (!id) return invalid(scheme, missing_header(names.id));
    if (!timestamp_text) return invalid(scheme, missing_header(names.timestamp));
    auto signed_at = parse_signed_time(input.config, *timestamp_text);
    if (!signed_at)
        return invalid(scheme, fmt::format("malformed header '{}': {} is not a Unix timestamp",
                                           names.timestamp, quote(*timestamp_text, 20)));
    SignatureTexts v1;
    SignatureTexts v1a;
    for (auto entry : split(*signatures, ' ')) {
        entry = list_item(entry);
        if (entry.empty()) continue;
        auto comma = entry.find(',');
        if (comma == std::string_view::npos) continue;
        auto version = entry.substr(0, comma);
        if (version == "v1")
            v1.push_back(entry.substr(comma + 1));
        else if (version == "v1a")
            v1a.push_back(entry.substr(comma + 1));
    }
    if (v1.empty() && v1a.empty())
        return invalid(scheme,
                       fmt::format("no v1 or v1a signature in header '{}'", names.signature));
    std::optional<std::string> label;
    std::string problem;
    std::size_t key_count = 0;
    if (!v1.empty() && !input.config.secrets.empty()) {
        auto decoded = decode_all(v1, SignatureEncoding::base64, 32, "the v1 signature");
        problem = decoded.problem;
        const auto& keys =
            input.keys.hmac(KeyDerivation::standard_base64, crypto::HashAlgorithm::sha256, scheme);
        key_count += keys.size();
        if (!decoded.signatures.empty())
            label = match_hmac(keys, decoded.signatures,
                               {*id, ".", *timestamp_text, ".", envelope.body});
    }
    if (!label && !v1a.empty() && !input.config.public_keys.empty()) {
        std::string message = fmt::format("{}.{}.", *id, *timestamp_text);
        message.append(envelope.body);
        const auto& keys = input.keys.ed25519(scheme);
        key_count += keys.size();
        for (auto text : v1a) {
            auto one = decode_signature(text, SignatureEncoding::base64, 64, "the v1a signature");
            if (!one.bytes) {
                if (problem.empty()) problem = one.problem;
                continue;
            }
            for (const auto& key : keys)
                if (!label && key.key.verify(message, one.bytes->view())) label = key.label;
        }
    }
    if (!label) {
        if (key_count == 0)
            return invalid(
                scheme, v1.empty() ? "only v1a (ed25519) signatures are present: pass --public-key"
                                   : "only v1 (HMAC) signatures are present: pass --secret");
        if (!problem.empty() && v1.size() + v1a.size() == 1) return invalid(scheme, problem);
        return invalid(scheme, no_match_reason(key_count, v1.size() + v1a.size()));
    }
    if (auto stale = check_age(input, *signed_at, ClockSides::both)) return invalid(scheme, *stale);
    return matched(input, scheme, *label, *id, signed_at,
                   {*id, ".", *timestamp_text, ".", envelope.body});
}

} // namespace

Verdict verify_standard(Input& input) {
    return verify_standard_family(input, Scheme::standard);
}
Verdict verify_svix(Input& input) {
    return verify_standard_family(input, Scheme::svix);
}

Verdict verify_discord(Input& input) {
    const auto& envelope = input.envelope;
    auto signature = envelope.header("X-Signature-Ed25519");
    if (!signature) return invalid(Scheme::discord, missing_header("X-Signature-Ed25519"));
    auto timestamp_text = envelope.header("X-Signature-Timestamp");
    if (!timestamp_text) return invalid(Scheme::discord, missing_header("X-Signature-Timestamp"));
    auto decoded = decode_signature(*signature, SignatureEncoding::hex, 64, "the signature");
    if (!decoded.bytes) return invalid(Scheme::discord, decoded.problem);
    std::string message(*timestamp_text);
    message.append(envelope.body);
    const auto& keys = input.keys.ed25519(Scheme::discord);
    for (const auto& key : keys) {
        if (!key.key.verify(message, decoded.bytes->view())) continue;
        // Discord's own library checks no freshness; idem applies the
        // tolerance both ways (docs/verify.md) unless --ignore-timestamp.
        auto signed_at = parse_signed_time(input.config, *timestamp_text);
        if (!signed_at && input.config.timestamp_check == TimestampCheck::enforce)
            return invalid(Scheme::discord,
                           fmt::format("malformed header 'X-Signature-Timestamp': {} is not "
                                       "a Unix timestamp",
                                       quote(*timestamp_text, 20)));
        if (signed_at)
            if (auto stale = check_age(input, *signed_at, ClockSides::both))
                return invalid(Scheme::discord, *stale);
        return matched(input, Scheme::discord, key.label, *signature, signed_at, {message});
    }
    return invalid(Scheme::discord, no_match_reason(keys.size(), 1));
}

} // namespace idem::verify::detail
