// Schemes whose signature travels in a form body rather than a header:
// Braintree's webhook notifications.

#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::verify::detail {

namespace {
// Braintree's SDKs refuse a payload of anything but base64 and newlines
// before they check it ("payload contains illegal characters").
bool braintree_payload_characters(std::string_view payload) {
    return std::all_of(payload.begin(), payload.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '=' || c == '/' ||
               c == '\n';
    });
}
} // namespace

// A form body with bt_signature ("PUBLIC_KEY|HEX&PUBLIC_KEY|HEX", one pair
// per API key pair) and bt_payload (base64 XML): each signature is the hex
// HMAC-SHA1 of the payload keyed by the SHA-1 of the private key (the
// secret). As braintree's SDKs: the pair of --param public_key when given
// (any pair otherwise: each proves the private key alike), and the payload
// as sent or with the newline a form may have trimmed.
Verdict verify_braintree(Input& input) {
    std::optional<std::string> signature_field;
    std::optional<std::string> payload;
    for (auto& [name, value] : parse_form(input.envelope.body)) {
        if (name == "bt_signature" && !signature_field)
            signature_field = std::move(value);
        else if (name == "bt_payload" && !payload)
            payload = std::move(value);
    }
    if (!signature_field || !payload)
        return invalid(Scheme::braintree,
                       fmt::format("no {} field in the form body (braintree signs inside it)",
                                   signature_field ? "bt_payload" : "bt_signature"));
    if (!braintree_payload_characters(*payload))
        return invalid(Scheme::braintree, "bt_payload holds characters other than base64 and "
                                          "newlines (braintree's SDKs refuse it)");
    auto wanted = input.config.params.find("public_key");
    SignatureTexts texts;
    std::size_t pairs = 0;
    for (auto pair : split(*signature_field, '&')) {
        auto bar = pair.find('|');
        if (bar == std::string_view::npos) continue;
        ++pairs;
        if (wanted != input.config.params.end() && pair.substr(0, bar) != wanted->second) continue;
        texts.push_back(pair.substr(bar + 1));
    }
    if (texts.empty())
        return invalid(Scheme::braintree,
                       pairs == 0 ? std::string("bt_signature holds no PUBLIC_KEY|SIGNATURE pair")
                                  : fmt::format("bt_signature has no pair for public key {}",
                                                quote(wanted->second, 40)));
    auto candidates = decode_all(texts, SignatureEncoding::hex, 20, "the signature");
    if (candidates.signatures.empty()) return invalid(Scheme::braintree, candidates.problem);
    const auto& keys =
        input.keys.hmac(KeyDerivation::sha1_digest, crypto::HashAlgorithm::sha1, Scheme::braintree);
    std::string_view signed_payload = *payload;
    auto label = match_hmac(keys, candidates.signatures, {signed_payload});
    std::string with_newline;
    if (!label) {
        with_newline = *payload + "\n";
        if ((label = match_hmac(keys, candidates.signatures, {with_newline})))
            signed_payload = with_newline;
    }
    if (!label) return invalid(Scheme::braintree, no_match_reason(keys.size(), texts.size()));
    return matched(input, Scheme::braintree, *label, texts.front(), std::nullopt, {signed_payload});
}

} // namespace idem::verify::detail
