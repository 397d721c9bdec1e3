// Schemes that sign the public URL the provider called: Twilio and Square.
// A proxy may have rewritten the URL on the way in, so the user supplies it
// (--url, or --url-base with the envelope's path appended).

#include "idem/net/url.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::verify::detail {

std::string twilio_form_suffix(std::string_view body) {
    auto pairs = parse_form(body);
    // Twilio's libraries sort by name, sort the values of a repeated name
    // among themselves, and sign a repeated (name, value) once.
    std::sort(pairs.begin(), pairs.end());
    pairs.erase(std::unique(pairs.begin(), pairs.end()), pairs.end());
    std::string suffix;
    for (const auto& [name, value] : pairs)
        suffix.append(name).append(value);
    return suffix;
}

std::string plivo_v3_base(std::string_view url, std::string_view form_body) {
    auto question = url.find('?');
    std::string base(url.substr(0, question));
    std::vector<std::pair<std::string, std::string>> query;
    if (question != std::string_view::npos) {
        auto text = url.substr(question + 1);
        query = parse_form(text.substr(0, text.find('#')));
    }
    auto fields = parse_form(form_body);
    // plivo-python sorts names, and the values of a repeated name.
    std::sort(query.begin(), query.end());
    std::sort(fields.begin(), fields.end());
    if (!query.empty() || !fields.empty()) base += '?';
    for (std::size_t i = 0; i < query.size(); ++i)
        base.append(i == 0 ? "" : "&").append(query[i].first).append("=").append(query[i].second);
    if (!query.empty() && !fields.empty()) base += '.';
    for (const auto& [name, value] : fields)
        base.append(name).append(value);
    return base;
}

std::vector<std::string> twilio_url_variants(const std::string& url) {
    std::vector<std::string> variants{url};
    auto spellings = net::port_spellings(url);
    if (!spellings) return variants;
    if (spellings->with_default_port) variants.push_back(*spellings->with_default_port);
    if (spellings->without_port) variants.push_back(*spellings->without_port);
    return variants;
}

std::optional<std::string> query_parameter(std::string_view url, std::string_view name) {
    auto question = url.find('?');
    if (question == std::string_view::npos) return std::nullopt;
    auto query = url.substr(question + 1);
    query = query.substr(0, query.find('#'));
    for (auto item : split(query, '&')) {
        auto equals = item.find('=');
        if (form_decode(item.substr(0, equals)) == name)
            return equals == std::string_view::npos ? "" : form_decode(item.substr(equals + 1));
    }
    return std::nullopt;
}

namespace {
bool is_form(const record::Envelope& envelope) {
    auto type = envelope.header("Content-Type");
    return type &&
           to_lower(trim(type->substr(0, type->find(';')))) == "application/x-www-form-urlencoded";
}
} // namespace

Verdict verify_twilio(Input& input) {
    const auto& envelope = input.envelope;
    auto signature = envelope.header("X-Twilio-Signature");
    if (!signature) return invalid(Scheme::twilio, missing_header("X-Twilio-Signature"));
    auto url = signed_url(input.config, envelope);
    if (!url)
        return invalid(Scheme::twilio, "twilio signs the public URL: pass --url or --url-base");
    auto decoded = decode_signature(*signature, SignatureEncoding::base64, 20, "the signature");
    if (!decoded.bytes) return invalid(Scheme::twilio, decoded.problem);
    std::string suffix;
    bool body_signed = true;
    if (auto body_hash = query_parameter(*url, "bodySHA256")) {
        // The JSON variant: the URL carries the body's SHA-256, and only the
        // URL is signed.
        auto actual = hex_encode(crypto::hash(crypto::HashAlgorithm::sha256, envelope.body).view());
        if (!crypto::constant_time_equal(to_lower(*body_hash), actual))
            return invalid(Scheme::twilio, "the bodySHA256 in the URL does not match the body");
    } else if (is_form(envelope)) {
        suffix = twilio_form_suffix(envelope.body);
    } else {
        body_signed = envelope.body.empty();
    }
    const auto& keys =
        input.keys.hmac(KeyDerivation::raw, crypto::HashAlgorithm::sha1, Scheme::twilio);
    SignatureSet single;
    single.push_back(*decoded.bytes);
    for (const auto& variant : twilio_url_variants(*url)) {
        auto label = match_hmac(keys, single, {variant, suffix});
        if (!label) continue;
        auto verdict = matched(input, Scheme::twilio, *label,
                               envelope.header("I-Twilio-Idempotency-Token").value_or(*signature),
                               std::nullopt,
                               // A body no signature covers keeps apart deliveries
                               // to one URL that sign the same bytes.
                               {variant, suffix, body_signed ? std::string_view() : envelope.body});
        // Twilio signs a body only as form parameters or through bodySHA256;
        // say so when this one was not covered.
        if (!body_signed)
            verdict.reason += " (the body is not signed: no bodySHA256 and not a form)";
        return verdict;
    }
    return invalid(Scheme::twilio,
                   no_match_reason(keys.size(), 1) + fmt::format(" (signed URL {})", quote(*url)));
}

Verdict verify_square(Input& input) {
    const auto& envelope = input.envelope;
    auto algorithm = crypto::HashAlgorithm::sha256;
    auto signature = envelope.header("X-Square-HmacSha256-Signature");
    if (!signature) {
        signature = envelope.header("X-Square-Signature");
        if (!signature)
            return invalid(Scheme::square, missing_header("X-Square-HmacSha256-Signature"));
        if (input.config.sha1 == Sha1Policy::reject)
            return invalid(Scheme::square,
                           "only the legacy SHA-1 'X-Square-Signature' is present; pass "
                           "--allow-sha1 to accept it");
        algorithm = crypto::HashAlgorithm::sha1;
    }
    auto url = signed_url(input.config, envelope);
    if (!url)
        return invalid(Scheme::square,
                       "square signs the notification URL: pass --url or --url-base");
    auto decoded = decode_signature(*signature, SignatureEncoding::base64,
                                    crypto::digest_size(algorithm), "the signature");
    if (!decoded.bytes) return invalid(Scheme::square, decoded.problem);
    const auto& keys = input.keys.hmac(KeyDerivation::raw, algorithm, Scheme::square);
    SignatureSet single;
    single.push_back(*decoded.bytes);
    auto label = match_hmac(keys, single, {*url, envelope.body});
    if (!label)
        return invalid(Scheme::square, no_match_reason(keys.size(), 1) +
                                           fmt::format(" (signed URL {})", quote(*url)));
    return matched(input, Scheme::square, *label, *signature, std::nullopt, {*url, envelope.body});
}

} // namespace idem::verify::detail
