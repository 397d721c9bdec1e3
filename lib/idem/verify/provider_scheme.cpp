// A provider described by a file (provider_spec.hpp): the same steps as the
// built-in HMAC schemes, driven by the spec. The message is assembled once
// per record into a buffer the worker keeps.

#include "idem/crypto/crypto.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <map>
#include <nlohmann/json.hpp>
#include <zlib.h>

namespace idem::verify::detail {

namespace {

// What one delivery's signature header says under the spec.
struct SignatureHeader {
    SignatureTexts signatures;
    std::optional<std::string_view> timestamp; // from a timestamp_key item
};

std::optional<std::string> read_header(const ProviderSpec& spec, std::string_view value,
                                       SignatureHeader& out) {
    value = trim(value);
    auto take = [&](std::string_view text) -> std::optional<std::string> {
        text = trim(text);
        if (!text.starts_with(spec.prefix))
            return fmt::format("malformed header '{}': expected the prefix {}",
                               spec.signature_header, quote(spec.prefix));
        out.signatures.push_back(text.substr(spec.prefix.size()));
        return std::nullopt;
    };
    if (!spec.separator) return take(value);
    if (spec.positional) {
        bool first = true;
        for (auto item : split(value, spec.separator)) {
            item = spec.separator == ',' ? trim(item) : list_item(item);
            if (first && spec.positional_timestamp) {
                out.timestamp = item;
                first = false;
            } else if (!item.empty()) {
                if (auto problem = take(item)) return problem;
            }
        }
        if (out.signatures.empty())
            return fmt::format("no signature after the timestamp in header '{}'",
                               spec.signature_header);
        return std::nullopt;
    }
    for (auto item : split(value, spec.separator)) {
        item = spec.separator == ',' ? trim(item) : list_item(item);
        auto equals = item.find(spec.key_separator);
        if (equals == std::string_view::npos) continue;
        auto key = item.substr(0, equals);
        auto text = item.substr(equals + 1);
        if (key == spec.signature_key) {
            if (auto problem = take(text)) return problem;
        } else if (!spec.timestamp_key.empty() && key == spec.timestamp_key && !out.timestamp) {
            out.timestamp = text;
        }
    }
    if (out.signatures.empty())
        return fmt::format("no {}{} signature in header '{}'", spec.signature_key,
                           spec.key_separator, spec.signature_header);
    if (!spec.timestamp_key.empty() && !out.timestamp)
        return fmt::format("malformed header '{}': no {}{} timestamp", spec.signature_header,
                           spec.timestamp_key, spec.key_separator);
    return std::nullopt;
}

// Unix seconds (or milliseconds) written as digits. Past year 9999 is no
// timestamp (and would overflow in microseconds), except, with
// `far_future_as_last_second`, seconds past it: a provider that refuses
// only old deliveries compares numbers and accepts one (cloudinary_npm's
// own test signs 7952342400000).
std::optional<Timestamp> unix_time(std::string_view text, bool milliseconds,
                                   bool far_future_as_last_second) {
    long long number = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error != std::errc() || end != text.data() + text.size() || number < 0) return std::nullopt;
    if (milliseconds) {
        if (number > 253402300799999LL) return std::nullopt;
        return Timestamp(std::chrono::duration_cast<Duration>(std::chrono::milliseconds(number)));
    }
    if (number > 253402300799LL) {
        if (!far_future_as_last_second) return std::nullopt;
        number = 253402300799LL;
    }
    return Timestamp(std::chrono::duration_cast<Duration>(std::chrono::seconds(number)));
}

std::optional<Timestamp> parse_provider_time(const ProviderSpec& spec, std::string_view text) {
    if (spec.timestamp_unit == ProviderSpec::TimestampUnit::rfc3339) {
        if (auto parsed = parse_timestamp(text)) return parsed;
        // A time without a zone is UTC, as Orb sends it ("2024-03-27T15:42:29.551").
        if (text.size() < 40 && text.find('T') != std::string_view::npos &&
            text.find_first_of("Zz+", text.find('T')) == std::string_view::npos &&
            text.find('-', text.find('T')) == std::string_view::npos)
            return parse_timestamp(std::string(text) + "Z");
        return std::nullopt;
    }
    if (spec.timestamp_unit == ProviderSpec::TimestampUnit::http_date) return parse_http_date(text);
    return unix_time(text, spec.timestamp_unit == ProviderSpec::TimestampUnit::milliseconds,
                     !spec.future_refused);
}

const char* timestamp_unit_wanted(ProviderSpec::TimestampUnit unit) {
    switch (unit) {
    case ProviderSpec::TimestampUnit::rfc3339:
        return "an RFC 3339 time";
    case ProviderSpec::TimestampUnit::milliseconds:
        return "Unix milliseconds";
    case ProviderSpec::TimestampUnit::http_date:
        return "an HTTP date (Mon, 02 Jan 2006 22:04:05 GMT)";
    case ProviderSpec::TimestampUnit::seconds:
        break;
    }
    return "Unix seconds";
}

} // namespace

bool message_signs_url(const ProviderSpec& spec) {
    return spec.message.find("{url}") != std::string::npos ||
           spec.message.find("{plivo_v3_url}") != std::string::npos;
}

std::optional<std::string> request_part(const ProviderSpec::RequestPart& part,
                                        const record::Envelope& envelope) {
    using From = ProviderSpec::RequestPart::From;
    if (part.from == From::header) {
        auto found = envelope.header(part.name);
        return found ? std::optional<std::string>(*found) : std::nullopt;
    }
    auto found = query_parameter(envelope.path, part.name);
    if (found && part.from == From::query_lowercase) *found = to_lower(*found);
    return found;
}

std::string provider_message(const ProviderSpec& spec, const record::Envelope& envelope,
                             BodyMembers& members, std::string_view timestamp, std::string_view id,
                             std::string_view url,
                             const std::map<std::string, std::string>& params) {
    TemplateValues values;
    values.body = envelope.body;
    values.timestamp = timestamp;
    values.id = id;
    values.method = envelope.method;
    values.path = envelope.path;
    values.url = url;
    for (const auto& json : spec.json_placeholders)
        // A member the body lacks signs as nothing: verify_provider has
        // refused such a delivery before, naming the member.
        values.extra.emplace_back(json.placeholder, members.text(json.path).value_or(""));
    for (const auto& name : spec.message_params) {
        // verify_provider has refused a run without it before.
        auto found = params.find(name);
        values.extra.emplace_back(fmt::format("{{param:{}}}", name),
                                  found == params.end() ? "" : found->second);
    }
    for (const auto& part : spec.request_parts)
        // verify_provider has refused a delivery without it before.
        values.extra.emplace_back(part.placeholder, request_part(part, envelope).value_or(""));
    if (spec.message.find("{plivo_v3_url}") != std::string::npos)
        values.extra.emplace_back("{plivo_v3_url}", plivo_v3_base(url, envelope.body));
    if (spec.message.find("{form_sorted}") != std::string::npos)
        values.extra.emplace_back("{form_sorted}", twilio_form_suffix(envelope.body));
    if (spec.message.find("{php_serialized_form}") != std::string::npos)
        values.extra.emplace_back("{php_serialized_form}",
                                  php_serialized_form(envelope.body, spec.signature_form_field));
    std::string crc;
    if (spec.message.find("{crc32}") != std::string::npos) {
        crc = std::to_string(::crc32(::crc32(0L, Z_NULL, 0),
                                     reinterpret_cast<const Bytef*>(envelope.body.data()),
                                     static_cast<uInt>(envelope.body.size())));
        values.crc32 = crc;
    }
    return expand_message_template(spec.message, values);
}

std::string php_serialized_form(std::string_view body, std::string_view left_out) {
    // As PHP's $_POST: the last of a repeated name counts; sorted by name
    // (ksort's byte order for these ASCII names); every value a string.
    std::map<std::string, std::string> fields;
    for (auto& [name, value] : parse_form(body))
        if (name != left_out) fields[std::move(name)] = std::move(value);
    auto serialized = fmt::format("a:{}:{{", fields.size());
    for (const auto& [name, value] : fields)
        serialized +=
            fmt::format("s:{}:\"{}\";s:{}:\"{}\";", name.size(), name, value.size(), value);
    serialized += '}';
    return serialized;
}

std::vector<std::string> dotted_path(std::string_view text) {
    std::vector<std::string> path;
    for (auto part : split(text, '.'))
        path.emplace_back(part);
    return path;
}

struct BodyMembers::Document {
    nlohmann::json json;
};

BodyMembers::BodyMembers(std::string_view body) : m_body(body) {}
BodyMembers::~BodyMembers() = default;

std::optional<std::string> BodyMembers::text(const std::vector<std::string>& path) {
    if (!m_document)
        m_document =
            std::make_unique<Document>(Document{nlohmann::json::parse(m_body, nullptr, false)});
    const nlohmann::json* at = &m_document->json;
    for (const auto& member : path) {
        if (!at->is_object()) return std::nullopt;
        auto found = at->find(member);
        if (found == at->end()) return std::nullopt;
        at = &*found;
    }
    if (at->is_number_integer() || at->is_number_unsigned()) return at->dump();
    if (at->is_string()) return at->get<std::string>();
    return std::nullopt;
}

std::optional<std::string> required_value(const VerifyConfig& config, const std::string& value) {
    auto param = ProviderSpec::required_param(value);
    if (param.empty()) return value;
    auto found = config.params.find(std::string(param));
    if (found == config.params.end()) return std::nullopt;
    return found->second;
}

namespace {
// A provider's verdicts name it, valid or not.
Verdict refused(const ProviderSpec& spec, std::string reason) {
    auto verdict = invalid(Scheme::provider, std::move(reason));
    verdict.provider = spec.name;
    return verdict;
}

Verdict accepted(const Input& input, const ProviderSpec& spec, std::string label,
                 std::string_view message_id, std::optional<Timestamp> signed_at,
                 std::string_view signed_content) {
    auto verdict =
        matched(input, Scheme::provider, std::move(label), message_id, signed_at, {signed_content});
    verdict.provider = spec.name;
    return verdict;
}

// Why `signed_at` is too old (or, where the provider refuses it, too far
// ahead) under the spec's tolerance; nullopt when it is within.
std::optional<std::string> outside_tolerance(const Input& input, const ProviderSpec& spec,
                                             Timestamp signed_at) {
    return check_age(input, signed_at,
                     spec.future_refused ? ClockSides::both : ClockSides::past_only,
                     spec.tolerance);
}
} // namespace

namespace {
// `construction: token`: the header carries the shared secret itself,
// compared in constant time. The token is never a nonce (nonces are
// remembered in the store): a token signs nothing, so a replay is the
// same body.
Verdict verify_token(Input& input, const ProviderSpec& spec, const SignatureHeader& header,
                     std::string_view id) {
    std::optional<std::string> label;
    const auto& secrets = input.config.secrets;
    for (const auto& secret : secrets) {
        auto expected = spec.token_base64 ? base64_encode(secret.value) : secret.value;
        for (auto text : header.signatures)
            if (crypto::constant_time_equal(text, expected)) label = secret.label;
        crypto::cleanse(expected);
        if (label) break;
    }
    if (!label)
        return refused(spec,
                       secrets.size() == 1
                           ? std::string("the token is not the secret")
                           : fmt::format("the token is none of the {} secrets", secrets.size()));
    auto verdict = accepted(input, spec, *label, id, std::nullopt, input.envelope.body);
    // No id header: the delivery is named by its body's digest, the nonce.
    if (verdict.message_id.empty()) verdict.message_id = verdict.nonce;
    verdict.reason = "the token matches (a token signs no body)";
    return verdict;
}
} // namespace

namespace {
// The verdict once the signatures were checked: no key matched, too old
// (or too far ahead), or valid.
Verdict settle(const Input& input, const ProviderSpec& spec,
               const std::optional<std::string>& label, std::size_t key_count,
               const SignatureHeader& header, std::string_view id,
               std::optional<Timestamp> signed_at, std::string_view message) {
    if (!label) return refused(spec, no_match_reason(key_count, header.signatures.size()));
    if (signed_at)
        if (auto stale = outside_tolerance(input, spec, *signed_at)) return refused(spec, *stale);
    return accepted(input, spec, *label, id.empty() ? header.signatures.front() : id, signed_at,
                    message);
}
} // namespace

namespace {
// The label of the first public key under which `verifies` accepts one of
// the base64 signatures of at most `longest` characters; `any_decoded` says
// whether one was base64 at all.
template <typename Keys, typename Verifies>
std::optional<std::string> first_verifying(const Keys& keys, const SignatureTexts& signatures,
                                           std::size_t longest, bool& any_decoded,
                                           Verifies verifies) {
    for (auto text : signatures) {
        auto signature = text.size() <= longest ? base64_decode(text) : std::nullopt;
        if (!signature) continue;
        any_decoded = true;
        for (const auto& key : keys)
            if (verifies(key.key, *signature)) return key.label;
    }
    return std::nullopt;
}

// The claim's text: a string's value, an integer as written.
std::optional<std::string> claim_text(const nlohmann::json& claims, const std::string& name) {
    auto found = claims.find(name);
    if (found == claims.end()) return std::nullopt;
    if (found->is_string()) return found->get<std::string>();
    if (found->is_number_integer() || found->is_number_unsigned()) return found->dump();
    return std::nullopt;
}

// `construction: jwt`: a JSON Web Token in compact form, its signature
// checked before any claim is believed, the algorithm the spec's (never
// the token's say: "none" and an HMAC keyed by a public key are refused),
// the body bound by its hash claim, and its time claim within tolerance.
Verdict verify_jwt(Input& input, const ProviderSpec& spec, const SignatureHeader& header) {
    constexpr std::size_t k_max_token = 16 * 1024;
    auto token = header.signatures.front();
    if (token.size() > k_max_token)
        return refused(spec, fmt::format("the token in '{}' is over {} bytes",
                                         spec.signature_header, k_max_token));
    auto first_dot = token.find('.');
    auto second_dot =
        first_dot == std::string_view::npos ? first_dot : token.find('.', first_dot + 1);
    if (second_dot == std::string_view::npos ||
        token.find('.', second_dot + 1) != std::string_view::npos)
        return refused(spec,
                       fmt::format("malformed header '{}': not a JSON Web Token (three parts)",
                                   spec.signature_header));
    auto signing_input = token.substr(0, second_dot);
    auto header_json = base64_decode(token.substr(0, first_dot));
    auto claims_json = base64_decode(token.substr(first_dot + 1, second_dot - first_dot - 1));
    auto signature = base64_decode(token.substr(second_dot + 1));
    if (!header_json || !claims_json || !signature)
        return refused(spec,
                       fmt::format("malformed header '{}': a part of the token is not base64url",
                                   spec.signature_header));
    auto jose = nlohmann::json::parse(*header_json, nullptr, false);
    auto wanted = spec.jwt_algorithm == ProviderSpec::JwtAlgorithm::hs256 ? "HS256" : "ES256";
    if (!jose.is_object() || !jose.contains("alg") || jose["alg"] != wanted)
        return refused(
            spec, fmt::format("the token's alg is not {}, which {} signs with", wanted, spec.name));
    std::optional<std::string> label;
    std::size_t key_count = 0;
    if (spec.jwt_algorithm == ProviderSpec::JwtAlgorithm::hs256) {
        const auto& keys =
            input.keys.hmac(key_derivation(spec), crypto::HashAlgorithm::sha256, Scheme::provider);
        key_count = keys.size();
        for (const auto& key : keys)
            if (!label &&
                crypto::constant_time_equal(key.key.mac({signing_input}).view(), *signature))
                label = key.label;
    } else {
        const auto& keys = input.keys.ecdsa_p256(spec.name);
        key_count = keys.size();
        for (const auto& key : keys)
            if (!label && key.key.verify_raw(signing_input, *signature)) label = key.label;
    }
    if (!label) return refused(spec, no_match_reason(key_count, 1));
    auto claims = nlohmann::json::parse(*claims_json, nullptr, false);
    if (!claims.is_object()) return refused(spec, "the token's claims are not a JSON object");
    for (const auto& [name, value] : spec.jwt_claims) {
        auto found = claim_text(claims, name);
        if (!found || *found != value)
            return refused(spec, fmt::format("the token's {} is {}: {} requires {}", name,
                                             found ? quote(*found, 40) : std::string("missing"),
                                             spec.name, quote(value)));
    }
    auto body_hash = claim_text(claims, spec.jwt_body_hash);
    auto digest = crypto::hash(crypto::HashAlgorithm::sha256, input.envelope.body);
    if (!body_hash ||
        !crypto::constant_time_equal(to_lower(*body_hash),
                                     encode_signature(digest.view(), SignatureEncoding::hex)))
        return refused(spec,
                       fmt::format("the token's {} is not the body's SHA-256: the body is not the "
                                   "one signed",
                                   spec.jwt_body_hash));
    std::optional<Timestamp> signed_at;
    if (!spec.jwt_time_claim.empty()) {
        auto text = claim_text(claims, spec.jwt_time_claim);
        if (text)
            signed_at =
                unix_time(*text, /*milliseconds=*/false, /*far_future_as_last_second=*/false);
        if (!signed_at)
            return refused(spec,
                           fmt::format("the token's {} is not Unix seconds", spec.jwt_time_claim));
        if (auto stale = outside_tolerance(input, spec, *signed_at)) return refused(spec, *stale);
    }
    auto jti = claim_text(claims, "jti");
    return accepted(input, spec, *label,
                    jti ? std::string_view(*jti) : token.substr(second_dot + 1), signed_at,
                    signing_input);
}
} // namespace

Verdict verify_provider(Input& input, const ProviderSpec& spec) {
    const auto& envelope = input.envelope;
    for (const auto& required : spec.require) {
        auto found = envelope.header(required.name);
        if (!found) return refused(spec, missing_header(required.name));
        auto value = trim(*found);
        if (auto param = ProviderSpec::required_param(required.values.front()); !param.empty()) {
            auto wanted = required_value(input.config, required.values.front());
            if (wanted && value != *wanted)
                return refused(
                    spec, fmt::format("header '{}' is {}: {} requires the {} given with --param",
                                      required.name, quote(value, 40), spec.name, param));
            continue;
        }
        if (std::find(required.values.begin(), required.values.end(), value) ==
            required.values.end())
            return refused(spec, fmt::format("header '{}' is {}: {} requires {}", required.name,
                                             quote(value, 40), spec.name,
                                             fmt::join(required.values, " or ")));
    }
    if (spec.construction == ProviderSpec::Construction::signed_fields) {
        auto verdict = verify_signed_fields(input, spec);
        verdict.provider = spec.name;
        return verdict;
    }
    // Every signature header present gives its signatures; any may match.
    SignatureHeader header;
    bool any_header = false;
    const auto& names = spec.signature_headers.empty()
                            ? std::vector<std::string>{spec.signature_header}
                            : spec.signature_headers;
    BodyMembers members(envelope.body);
    std::optional<std::string> in_body_signature; // the views below look into it
    if (!spec.signature_form_field.empty()) {
        for (auto& [name, value] : parse_form(envelope.body))
            if (name == spec.signature_form_field) in_body_signature = std::move(value);
        if (!in_body_signature || in_body_signature->empty())
            return refused(spec,
                           fmt::format("no {} field in the form body", spec.signature_form_field));
        if (auto problem = read_header(spec, *in_body_signature, header))
            return refused(spec, *problem);
        any_header = true;
    } else if (!spec.signature_path.empty()) {
        in_body_signature = members.text(spec.signature_path);
        if (!in_body_signature || in_body_signature->empty())
            return refused(spec, fmt::format("no signature at {} in the body",
                                             fmt::join(spec.signature_path, ".")));
        if (auto problem = read_header(spec, *in_body_signature, header))
            return refused(spec, *problem);
        any_header = true;
    }
    for (const auto& name : names) {
        auto value = spec.signature_path.empty() && spec.signature_form_field.empty()
                         ? envelope.header(name)
                         : std::nullopt;
        if (!value) continue;
        any_header = true;
        if (auto problem = read_header(spec, *value, header)) return refused(spec, *problem);
    }
    if (!any_header) return refused(spec, missing_header(spec.signature_header));
    for (const auto& json : spec.json_placeholders)
        if (!members.text(json.path))
            return refused(spec,
                           fmt::format("no {} in the body (a number or a string), which {} signs",
                                       json.path_text, spec.name));
    for (const auto& part : spec.request_parts)
        if (!request_part(part, envelope))
            return refused(spec, part.from == ProviderSpec::RequestPart::From::header
                                     ? missing_header(part.name)
                                     : fmt::format("no {} in the request's query, which {} signs",
                                                   quote(part.name, 40), spec.name));
    std::string_view timestamp_text;
    std::optional<Timestamp> signed_at;
    if (header.timestamp) timestamp_text = *header.timestamp;
    if (!spec.timestamp_header.empty()) {
        auto found = envelope.header(spec.timestamp_header);
        if (!found) return refused(spec, missing_header(spec.timestamp_header));
        timestamp_text = trim(*found);
    }
    std::optional<std::string> in_body;
    if (!spec.timestamp_path.empty()) {
        in_body = members.text(spec.timestamp_path);
        if (!in_body)
            return refused(spec,
                           fmt::format("no timestamp at {} in the body (a number or a string)",
                                       fmt::join(spec.timestamp_path, ".")));
        timestamp_text = *in_body;
    }
    if (!spec.timestamp_header.empty() || !spec.timestamp_key.empty() ||
        (spec.positional && spec.positional_timestamp) || in_body) {
        signed_at = parse_provider_time(spec, timestamp_text);
        if (!signed_at)
            return refused(
                spec,
                fmt::format(
                    "malformed timestamp {} in {}: expected {}", quote(timestamp_text, 40),
                    in_body ? fmt::format("the body's {}", fmt::join(spec.timestamp_path, "."))
                    : spec.timestamp_header.empty() ? fmt::format("'{}'", spec.signature_header)
                                                    : fmt::format("'{}'", spec.timestamp_header),
                    timestamp_unit_wanted(spec.timestamp_unit)));
    }
    std::string_view id;
    if (!spec.id_header.empty()) {
        auto found = envelope.header(spec.id_header);
        if (found)
            id = *found;
        else if (spec.message.find("{id}") != std::string::npos)
            return refused(spec, missing_header(spec.id_header));
    }
    std::string url;
    if (message_signs_url(spec)) {
        auto signed_at_url = signed_url(input.config, envelope);
        if (!signed_at_url)
            return refused(spec, fmt::format("provider {} signs the URL: pass --url or --url-base",
                                             spec.name));
        url = std::move(*signed_at_url);
    }
    if (spec.construction == ProviderSpec::Construction::token)
        return verify_token(input, spec, header, id);
    if (spec.construction == ProviderSpec::Construction::jwt)
        return verify_jwt(input, spec, header);
    for (const auto& param : spec.message_params)
        if (!input.config.params.contains(param))
            return refused(spec, fmt::format("{} signs a value of yours: pass --param {}=VALUE",
                                             spec.name, param));
    std::optional<std::string> label;
    std::size_t key_count = 0;
    if (spec.construction == ProviderSpec::Construction::rsa ||
        spec.construction == ProviderSpec::Construction::ecdsa_p256 ||
        spec.construction == ProviderSpec::Construction::ed25519) {
        auto message =
            provider_message(spec, envelope, members, timestamp_text, id, url, input.config.params);
        bool any_decoded = false;
        if (spec.construction == ProviderSpec::Construction::rsa) {
            // PKCS #1 v1.5 in base64: 8192 bits are 1,368 characters.
            const auto& keys = input.keys.rsa(spec.name);
            key_count = keys.size();
            label = first_verifying(keys, header.signatures, 1400, any_decoded,
                                    [&](const auto& key, std::string_view signature) {
                                        return key.verify(spec.algorithm, message, signature);
                                    });
        } else if (spec.construction == ProviderSpec::Construction::ed25519) {
            // 64 bytes: 88 characters of padded base64.
            const auto& keys = input.keys.ed25519(Scheme::provider);
            key_count = keys.size();
            label = first_verifying(keys, header.signatures, 88, any_decoded,
                                    [&](const auto& key, std::string_view signature) {
                                        return key.verify(message, signature);
                                    });
        } else {
            // DER in base64: a P-256 signature is at most 72 bytes, 96 characters.
            const auto& keys = input.keys.ecdsa_p256(spec.name);
            key_count = keys.size();
            label = first_verifying(keys, header.signatures, 96, any_decoded,
                                    [&](const auto& key, std::string_view signature) {
                                        return key.verify(message, signature);
                                    });
        }
        if (!any_decoded)
            return refused(spec, fmt::format("malformed header '{}': the signature is not base64",
                                             spec.signature_header));
        return settle(input, spec, label, key_count, header, id, signed_at, message);
    }
    if (spec.strict_encoding) {
        // Only signatures written as the encoding writes them count.
        SignatureTexts canonical;
        for (auto text : header.signatures) {
            auto decoded = decode_signature(text, spec.encoding,
                                            crypto::digest_size(spec.algorithm), "the signature");
            if (!decoded.bytes || encode_signature(decoded.bytes->view(), spec.encoding) == text)
                canonical.push_back(text);
        }
        header.signatures = canonical;
        if (header.signatures.empty())
            return refused(spec,
                           fmt::format("the signature is not written as {} writes it ({} compares "
                                       "the text: strict_encoding)",
                                       encoding_name(spec.encoding), spec.name));
    }
    // With several algorithms, the first whose digest size the signature has.
    auto algorithm = spec.algorithm;
    auto candidates = decode_all(header.signatures, spec.encoding, crypto::digest_size(algorithm),
                                 "the signature");
    for (auto other : spec.other_algorithms) {
        if (!candidates.signatures.empty()) break;
        auto decoded = decode_all(header.signatures, spec.encoding, crypto::digest_size(other),
                                  "the signature");
        if (decoded.signatures.empty()) continue;
        algorithm = other;
        candidates = std::move(decoded);
    }
    if (candidates.signatures.empty()) return refused(spec, candidates.problem);
    auto message =
        provider_message(spec, envelope, members, timestamp_text, id, url, input.config.params);
    if (spec.construction == ProviderSpec::Construction::digest) {
        // HASH(secret || message): the secret's bytes as given.
        const auto& secrets = input.config.secrets;
        key_count = secrets.size();
        for (const auto& secret : secrets) {
            auto digest = crypto::hash(algorithm, spec.secret_last ? message + secret.value
                                                                   : secret.value + message);
            for (const auto& candidate : candidates.signatures)
                if (crypto::constant_time_equal(digest.view(), candidate.view()))
                    label = secret.label;
            if (label) break;
        }
    } else {
        const auto& keys = input.keys.hmac(key_derivation(spec), algorithm, Scheme::provider);
        key_count = keys.size();
        label = match_hmac(keys, candidates.signatures, {message});
    }
    return settle(input, spec, label, key_count, header, id, signed_at, message);
}

} // namespace idem::verify::detail
