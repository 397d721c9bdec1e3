#include "idem/verify/provider_spec.hpp"

#include "idem/util/detail/yaml_support.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/detail/schemes.hpp"
#include "idem/verify/detail/spec_reading.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace idem::verify {

using detail::header_name;
using detail::is_dotted_path;
using detail::is_header_name;
using detail::is_param_name;

namespace {

using idem::detail::fail_at;
using idem::detail::scalar;

// What a spec may say; anything else is a typo, refused with its place.
constexpr std::string_view k_fields[] = {"name",
                                         "source",
                                         "signature_header",
                                         "separator",
                                         "key_separator",
                                         "signature_key",
                                         "timestamp_key",
                                         "prefix",
                                         "algorithm",
                                         "encoding",
                                         "message",
                                         "timestamp_header",
                                         "timestamp_unit",
                                         "future_refused",
                                         "id_header",
                                         "detect",
                                         "construction",
                                         "secret",
                                         "require",
                                         "secret_normalize",
                                         "strict_encoding",
                                         "timestamp_path",
                                         "tolerance",
                                         "positional",
                                         "scheme",
                                         "signature_path",
                                         "jwt_algorithm",
                                         "jwt_claims",
                                         "jwt_body_hash",
                                         "jwt_time_claim",
                                         "signature_form_field",
                                         "signed_items",
                                         "item_member",
                                         "signed_fields",
                                         "field_separator"};

// A field that names one of a few words, each meaning a value; anything
// else is refused where it is, with the words it could have been.
template <class Value>
Value one_of(const std::string& file, const YAML::Node& node, std::string_view field,
             std::initializer_list<std::pair<std::string_view, Value>> words,
             std::string_view hint) {
    auto word = scalar(file, node, field);
    for (const auto& [name, value] : words)
        if (word == name) return value;
    fail_at(file, node, fmt::format("{} {}: {}", field, quote(word), hint));
}

void refuse_unknown_fields(const std::string& file, const YAML::Node& node) {
    for (const auto& field : node) {
        auto key = field.first.as<std::string>();
        if (std::find(std::begin(k_fields), std::end(k_fields), key) == std::end(k_fields))
            fail_at(file, field.first,
                    fmt::format("unknown field {}: expected name, source, signature_header, "
                                "separator, key_separator, signature_key, timestamp_key, prefix, "
                                "algorithm, encoding, message, timestamp_header, timestamp_unit, "
                                "future_refused, id_header, detect, construction, secret, "
                                "secret_normalize, strict_encoding, require, timestamp_path, "
                                "tolerance, positional, scheme, signature_path, jwt_algorithm, "
                                "jwt_claims, jwt_body_hash, jwt_time_claim or "
                                "signature_form_field",
                                quote(key)));
    }
}

std::string name_of(const std::string& file, const YAML::Node& node) {
    if (!node["name"]) fail_at(file, node, "a provider spec needs a name");
    auto name = scalar(file, node["name"], "name");
    if (!std::all_of(name.begin(), name.end(), [](char c) {
            return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
        }))
        fail_at(file, node["name"],
                fmt::format("name {}: use lowercase letters, digits, '-' and '_'", quote(name)));
    return name;
}

// A signature header of items ("t=...,v1=..."): separator, key_separator,
// signature_key, timestamp_key.
void read_signature_items(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    if (!node["separator"]) {
        if (node["signature_key"] || node["timestamp_key"] || node["key_separator"] ||
            node["positional"])
            fail_at(file, node,
                    "signature_key, timestamp_key, key_separator and positional need a separator");
        return;
    }
    auto separator = scalar(file, node["separator"], "separator");
    if (separator != "," && separator != ";" && separator != " " && separator != ", " &&
        separator != "; ")
        fail_at(file, node["separator"], "separator: use ',' or ';' (or ' ', ', ', '; ')");
    spec.separator = separator[0];
    spec.separator_text = separator; // items are trimmed when read: ", " reads as ',
    if (node["key_separator"]) {
        auto key_separator = scalar(file, node["key_separator"], "key_separator");
        if (key_separator != "=" && key_separator != ",")
            fail_at(file, node["key_separator"], "key_separator: '=' (v1=...) or ',' (v1,...)");
        if (key_separator[0] == spec.separator)
            fail_at(file, node["key_separator"],
                    "key_separator: the items' separator cannot also split key from value");
        spec.key_separator = key_separator[0];
    }
    if (node["positional"]) {
        auto value = scalar(file, node["positional"], "positional");
        if (value != "true" && value != "false" && value != "signatures")
            fail_at(file, node["positional"],
                    "positional: true (the timestamp first, then signatures), signatures (every "
                    "item one) or false");
        spec.positional = value != "false";
        spec.positional_timestamp = value == "true";
    }
    if (spec.positional) {
        // "<timestamp>,<signature>,<signature>": no keys to name.
        for (const char* field : {"signature_key", "timestamp_key", "key_separator"})
            if (node[field])
                fail_at(file, node[field],
                        fmt::format("{}: positional items have no keys (the timestamp is the "
                                    "first, the signatures the rest)",
                                    field));
        return;
    }
    if (!node["signature_key"])
        fail_at(file, node, "with a separator, signature_key names the signature items");
    spec.signature_key = scalar(file, node["signature_key"], "signature_key");
    if (node["timestamp_key"])
        spec.timestamp_key = scalar(file, node["timestamp_key"], "timestamp_key");
}

// The fields a construction has no use for, refused where they are:
// "<field>: <why>".
void refuse_fields(const std::string& file, const YAML::Node& node,
                   std::initializer_list<const char*> fields, std::string_view why) {
    for (const char* field : fields)
        if (node[field]) fail_at(file, node[field], fmt::format("{}: {}", field, why));
}

std::vector<std::string> dotted_field(const std::string& file, const YAML::Node& node,
                                      std::string_view what) {
    auto text = scalar(file, node, what);
    if (!is_dotted_path(text))
        fail_at(file, node, fmt::format("{} {}: dotted member names", what, quote(text)));
    return detail::dotted_path(text);
}

// construction: signed-fields and the fields that go with it alone.
void read_signed_fields(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    bool signed_fields = spec.construction == ProviderSpec::Construction::signed_fields;
    for (const char* field : {"signed_items", "item_member", "signed_fields", "field_separator"})
        if (!signed_fields && node[field])
            fail_at(file, node[field],
                    fmt::format("{}: goes with construction: signed-fields", field));
    if (!signed_fields) return;
    refuse_fields(file, node,
                  {"signature_header", "message", "timestamp_header", "timestamp_key",
                   "timestamp_path", "separator", "id_header", "strict_encoding"},
                  "construction: signed-fields signs fields of each item of the body (say which "
                  "with signed_fields)");
    if (!node["signed_items"] || !node["signed_fields"] || !node["signature_path"])
        fail_at(file, node,
                "construction: signed-fields needs signed_items (the array), signed_fields "
                "and signature_path (in each item)");
    spec.signed_items = dotted_field(file, node["signed_items"], "signed_items");
    if (node["item_member"]) spec.item_member = scalar(file, node["item_member"], "item_member");
    const auto& fields = node["signed_fields"];
    if (!fields.IsSequence() || fields.size() == 0)
        fail_at(file, fields, "signed_fields: the item's dotted member paths, in signing order");
    for (const auto& field : fields) {
        spec.signed_field_names.push_back(scalar(file, field, "signed_fields"));
        spec.signed_fields.push_back(dotted_field(file, field, "signed_fields"));
    }
    if (node["field_separator"])
        spec.field_separator = scalar(file, node["field_separator"], "field_separator");
}

// A construction whose signature (or token) is written in base64 or not
// encoded at all: an `encoding` that says otherwise is refused with `why`.
void refuse_encodings_but_base64(const std::string& file, const YAML::Node& node,
                                 const ProviderSpec& spec, std::string_view why) {
    if (node["encoding"] && spec.encoding != SignatureEncoding::base64)
        fail_at(file, node["encoding"], fmt::format("encoding: {}", why));
}

// How the signature is made: algorithm, encoding, construction, secret.
void read_construction(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    try {
        if (node["algorithm"] && node["algorithm"].IsSequence() && node["algorithm"].size() > 0) {
            // Each its own digest size, so a signature's length says which.
            std::vector<crypto::HashAlgorithm> listed;
            for (const auto& item : node["algorithm"]) {
                auto algorithm = parse_hash_algorithm(scalar(file, item, "algorithm"));
                if (std::find(listed.begin(), listed.end(), algorithm) != listed.end())
                    fail_at(file, item, "algorithm: each at most once");
                listed.push_back(algorithm);
            }
            spec.algorithm = listed.front();
            spec.other_algorithms.assign(listed.begin() + 1, listed.end());
        } else if (node["algorithm"]) {
            spec.algorithm = parse_hash_algorithm(scalar(file, node["algorithm"], "algorithm"));
        }
        if (node["encoding"])
            spec.encoding = parse_signature_encoding(scalar(file, node["encoding"], "encoding"));
    } catch (const UsageError& error) {
        fail_at(file, node["algorithm"] ? node["algorithm"] : node["encoding"], error.what());
    }
    using Construction = ProviderSpec::Construction;
    if (node["construction"])
        spec.construction = one_of<Construction>(
            file, node["construction"], "construction",
            {{"hmac", Construction::hmac},
             {"digest", Construction::digest},
             {"token", Construction::token},
             {"ecdsa-p256", Construction::ecdsa_p256},
             {"jwt", Construction::jwt},
             {"rsa", Construction::rsa},
             {"ed25519", Construction::ed25519},
             {"signed-fields", Construction::signed_fields}},
            "use hmac (keyed by the secret), digest (a hash of the secret and the message), "
            "token (the header carries the secret itself), ecdsa-p256, rsa or ed25519 (a public "
            "key's), jwt (a JSON Web Token) or signed-fields (items of the body, each signed)");
    read_signed_fields(file, node, spec);
    if (spec.construction == Construction::rsa) {
        refuse_fields(file, node, {"secret", "strict_encoding", "secret_normalize"},
                      "construction: rsa is checked with a public key");
        refuse_encodings_but_base64(file, node, spec, "an RSA signature is written in base64");
        spec.encoding = SignatureEncoding::base64;
    }
    bool any_jwt_field = node["jwt_algorithm"] || node["jwt_claims"] || node["jwt_body_hash"] ||
                         node["jwt_time_claim"];
    if (spec.construction != Construction::jwt && any_jwt_field)
        fail_at(file, node,
                "jwt_algorithm, jwt_claims, jwt_body_hash and jwt_time_claim go with "
                "construction: jwt");
    if (spec.construction == Construction::jwt) {
        refuse_fields(file, node,
                      {"algorithm", "encoding", "message", "secret", "strict_encoding",
                       "secret_normalize", "timestamp_header", "timestamp_key", "timestamp_path",
                       "separator"},
                      "construction: jwt signs the token's own header and claims (say what they "
                      "must hold with jwt_claims, jwt_body_hash, jwt_time_claim)");
        if (!node["jwt_algorithm"])
            fail_at(file, node, "construction: jwt needs jwt_algorithm (HS256 or ES256)");
        spec.jwt_algorithm = one_of<ProviderSpec::JwtAlgorithm>(
            file, node["jwt_algorithm"], "jwt_algorithm",
            {{"HS256", ProviderSpec::JwtAlgorithm::hs256},
             {"ES256", ProviderSpec::JwtAlgorithm::es256}},
            "use HS256 (keyed by the secret) or ES256 (a P-256 --public-key)");
        if (node["jwt_claims"]) {
            if (!node["jwt_claims"].IsMap() || node["jwt_claims"].size() == 0)
                fail_at(file, node["jwt_claims"], "jwt_claims: claim names, each with its value");
            for (const auto& entry : node["jwt_claims"])
                spec.jwt_claims.emplace_back(scalar(file, entry.first, "jwt_claims"),
                                             scalar(file, entry.second, "jwt_claims"));
        }
        if (node["jwt_body_hash"])
            spec.jwt_body_hash = scalar(file, node["jwt_body_hash"], "jwt_body_hash");
        if (node["jwt_time_claim"])
            spec.jwt_time_claim = scalar(file, node["jwt_time_claim"], "jwt_time_claim");
        if (spec.jwt_body_hash.empty())
            fail_at(file, node,
                    "construction: jwt needs jwt_body_hash: a token that names no hash of the "
                    "body proves nothing about it");
    }
    if (spec.construction == Construction::ecdsa_p256) {
        refuse_fields(file, node, {"algorithm", "secret", "strict_encoding", "secret_normalize"},
                      "construction: ecdsa-p256 is checked with a public key over SHA-256");
        refuse_encodings_but_base64(file, node, spec, "an ECDSA signature is DER in base64");
        spec.encoding = SignatureEncoding::base64;
    }
    if (spec.construction == Construction::ed25519) {
        refuse_fields(file, node, {"algorithm", "secret", "strict_encoding", "secret_normalize"},
                      "construction: ed25519 is checked with an ed25519 public key");
        refuse_encodings_but_base64(file, node, spec, "an ed25519 signature is read in base64");
        spec.encoding = SignatureEncoding::base64;
    }
    if (spec.construction == Construction::token) {
        refuse_fields(file, node,
                      {"algorithm", "message", "timestamp_header", "timestamp_key",
                       "timestamp_path", "strict_encoding", "secret_normalize"},
                      "construction: token signs nothing (the header is the secret itself)");
        refuse_encodings_but_base64(file, node, spec,
                                    "a token is written as is, or in base64 (HTTP Basic)");
        spec.token_base64 = node["encoding"].IsDefined();
    }
    using SecretForm = ProviderSpec::SecretForm;
    if (node["secret"]) {
        spec.secret_form = one_of<SecretForm>(
            file, node["secret"], "secret",
            {{"raw", SecretForm::raw},
             {"base64", SecretForm::base64},
             {"hex", SecretForm::hex},
             {"whsec-or-text", SecretForm::whsec_or_text}},
            "use raw (its bytes as given), base64 or hex (the bytes it spells), or "
            "whsec-or-text (whsec_<base64> decoded, else the text)");
        if (spec.secret_form != ProviderSpec::SecretForm::raw &&
            spec.construction != ProviderSpec::Construction::hmac &&
            spec.construction != ProviderSpec::Construction::signed_fields)
            fail_at(file, node["secret"],
                    "secret: base64 and hex go with construction: hmac (or signed-fields)");
    }
    if (node["strict_encoding"]) {
        auto value = scalar(file, node["strict_encoding"], "strict_encoding");
        if (value != "true" && value != "false")
            fail_at(file, node["strict_encoding"], "strict_encoding: true or false");
        spec.strict_encoding = value == "true";
    }
    if (node["secret_normalize"]) {
        auto form = scalar(file, node["secret_normalize"], "secret_normalize");
        if (form != "nfkd")
            fail_at(file, node["secret_normalize"],
                    fmt::format("secret_normalize {}: nfkd is the one form", quote(form)));
        if (spec.secret_form != SecretForm::raw ||
            spec.construction != ProviderSpec::Construction::hmac)
            fail_at(file, node["secret_normalize"],
                    "secret_normalize: goes with a raw secret and construction: hmac");
        spec.secret_nfkd = true;
    }
}

// The signed time: timestamp_header, timestamp_unit, future_refused (after
// the message, which may sign it).
void read_timestamp(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    if (node["timestamp_header"]) {
        spec.timestamp_header = header_name(file, node["timestamp_header"], "timestamp_header");
        if (!spec.timestamp_key.empty() || (spec.positional && spec.positional_timestamp))
            fail_at(file, node["timestamp_header"],
                    "give timestamp_header or timestamp_key (or positional), not both");
    }
    if (node["timestamp_path"]) {
        auto path = scalar(file, node["timestamp_path"], "timestamp_path");
        for (auto part : split(path, '.')) {
            if (part.empty())
                fail_at(file, node["timestamp_path"],
                        fmt::format("timestamp_path {}: dotted member names", quote(path)));
            spec.timestamp_path.emplace_back(part);
        }
        if (!spec.timestamp_header.empty() || !spec.timestamp_key.empty() ||
            (spec.positional && spec.positional_timestamp))
            fail_at(file, node["timestamp_path"],
                    "give one of timestamp_header, timestamp_key and timestamp_path");
    }
    if (node["tolerance"]) {
        auto text = scalar(file, node["tolerance"], "tolerance");
        try {
            spec.tolerance = text == "none" ? Duration::max() : parse_duration(text);
        } catch (const UsageError&) {
            fail_at(file, node["tolerance"],
                    fmt::format("tolerance {}: a duration (5m, 60s), or none", quote(text)));
        }
        if (*spec.tolerance <= Duration{0}) fail_at(file, node["tolerance"], "tolerance: above 0");
    }
    using Unit = ProviderSpec::TimestampUnit;
    if (node["timestamp_unit"])
        spec.timestamp_unit = one_of<Unit>(file, node["timestamp_unit"], "timestamp_unit",
                                           {{"s", Unit::seconds},
                                            {"seconds", Unit::seconds},
                                            {"ms", Unit::milliseconds},
                                            {"milliseconds", Unit::milliseconds},
                                            {"rfc3339", Unit::rfc3339},
                                            {"http-date", Unit::http_date}},
                                           "use s, ms, rfc3339 or http-date");
    bool has_timestamp = !spec.timestamp_header.empty() || !spec.timestamp_key.empty() ||
                         (spec.positional && spec.positional_timestamp) ||
                         !spec.timestamp_path.empty();
    if (spec.message.find("{timestamp}") != std::string::npos && !has_timestamp)
        fail_at(file, node["message"],
                "message signs {timestamp}: give timestamp_header, timestamp_key or "
                "timestamp_path");
    has_timestamp = has_timestamp || !spec.jwt_time_claim.empty();
    if (spec.tolerance && !has_timestamp)
        fail_at(file, node["tolerance"], "tolerance: the provider signs no timestamp");
    if (node["future_refused"]) {
        auto value = scalar(file, node["future_refused"], "future_refused");
        if (value != "true" && value != "false")
            fail_at(file, node["future_refused"], "future_refused: true or false");
        spec.future_refused = value == "true";
    }
}

// One `detect:` item: "Name", "Name: value" or "Name: start*".
ProviderSpec::DetectHeader detect_header_at(const std::string& file, const YAML::Node& item) {
    auto text = scalar(file, item, "detect");
    ProviderSpec::DetectHeader header;
    auto colon = text.find(':');
    header.name = std::string(trim(std::string_view(text).substr(0, colon)));
    if (colon != std::string::npos) {
        header.value = std::string(trim(std::string_view(text).substr(colon + 1)));
        if (header.value.ends_with('*')) {
            header.value.pop_back();
            header.prefix = true;
        }
        if (header.value.empty())
            fail_at(file, item, fmt::format("detect: {} names no value after ':'", quote(text)));
    }
    if (!is_header_name(header.name))
        fail_at(file, item, fmt::format("detect: {} is not a header name", quote(header.name)));
    return header;
}

// The headers that tell a delivery is this provider's (by default, its
// signature header).
void read_detect(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    if (!node["detect"]) {
        if (!spec.signature_header.empty()) spec.detect.push_back({spec.signature_header, {}});
        return;
    }
    const auto& detect = node["detect"];
    if (detect.IsScalar()) {
        spec.detect.push_back(detect_header_at(file, detect));
    } else if (detect.IsSequence() && detect.size() > 0) {
        for (const auto& item : detect)
            spec.detect.push_back(detect_header_at(file, item));
    } else if (detect.IsSequence()) {
        // `detect: []`: the headers are any sender's (Okta's Authorization
        // value is the user's choice): --scheme NAME picks it, auto never.
    } else {
        fail_at(file, detect, "detect: a header name or a list of them ([] for none)");
    }
}

// `require:`, header names each with the value, or the list of values, the
// provider's SDK insists on.
void read_require(const std::string& file, const YAML::Node& node, ProviderSpec& spec) {
    if (!node["require"]) return;
    const auto& require = node["require"];
    if (!require.IsMap() || require.size() == 0)
        fail_at(file, require, "require: header names, each with its value or list of values");
    for (const auto& entry : require) {
        ProviderSpec::RequiredHeader required;
        required.name = header_name(file, entry.first, "require");
        if (entry.second.IsSequence() && entry.second.size() > 0) {
            for (const auto& value : entry.second)
                required.values.push_back(scalar(file, value, "require"));
        } else {
            required.values.push_back(scalar(file, entry.second, "require"));
        }
        for (const auto& value : required.values)
            if (value.starts_with("{") && !is_param_name(ProviderSpec::required_param(value)))
                fail_at(file, entry.second,
                        fmt::format("require: {} is neither a value nor {{param:NAME}} (NAME of "
                                    "lowercase letters, digits and '_')",
                                    quote(value)));
        if (required.values.size() > 1 &&
            std::any_of(required.values.begin(), required.values.end(),
                        [](const std::string& value) {
                            return !ProviderSpec::required_param(value).empty();
                        }))
            fail_at(file, entry.second, "require: a {param:NAME} value stands alone");
        spec.require.push_back(std::move(required));
    }
}

// One provider spec, field by field; every failure names the file, line
// and column of the value at fault.
ProviderSpec parse_one(const std::string& file, const YAML::Node& node) {
    if (!node.IsMap())
        fail_at(file, node, "a provider spec is a mapping: name, signature_header, message, ...");
    refuse_unknown_fields(file, node);
    ProviderSpec spec;
    spec.origin = file;
    spec.name = name_of(file, node);
    if (node["source"]) spec.source = scalar(file, node["source"], "source");
    if (node["scheme"]) {
        // A provider that signs as a built-in scheme: nothing else to say.
        for (const auto& field : node) {
            auto key = field.first.as<std::string>();
            if (key != "name" && key != "source" && key != "scheme")
                fail_at(file, field.first,
                        fmt::format("{}: a provider with scheme: signs as that scheme does "
                                    "(give only name, source and scheme)",
                                    key));
        }
        auto word = scalar(file, node["scheme"], "scheme");
        Scheme scheme{};
        try {
            scheme = parse_scheme(word);
        } catch (const UsageError& error) {
            fail_at(file, node["scheme"], error.what());
        }
        if (scheme == Scheme::auto_detect || scheme == Scheme::hmac)
            fail_at(file, node["scheme"],
                    fmt::format("scheme {}: name a provider's scheme (svix, standard, stripe, ...)",
                                quote(word)));
        spec.builtin = scheme;
        return spec;
    }
    if (node["signature_form_field"]) {
        // The signature is a field of the form body: no header carries it.
        if (node["signature_header"] || node["signature_path"])
            fail_at(file, node["signature_form_field"],
                    "give one of signature_header, signature_path and signature_form_field");
        spec.signature_form_field =
            scalar(file, node["signature_form_field"], "signature_form_field");
    } else if (node["signature_path"]) {
        // The signature is in the JSON body: no header carries it.
        if (node["signature_header"])
            fail_at(file, node["signature_path"],
                    "give signature_header or signature_path, not both");
        auto path = scalar(file, node["signature_path"], "signature_path");
        if (!is_dotted_path(path))
            fail_at(file, node["signature_path"],
                    fmt::format("signature_path {}: dotted member names", quote(path)));
        spec.signature_path = detail::dotted_path(path);
    } else if (!node["signature_header"]) {
        fail_at(
            file, node,
            fmt::format("provider {} needs a signature_header (or a signature_path)", spec.name));
    }
    const auto& headers = node["signature_header"];
    if (!headers) {
        // Body-signed: nothing for auto to tell it by, unless detect says.
    } else if (headers.IsSequence() && headers.size() > 0) {
        for (const auto& item : headers)
            spec.signature_headers.push_back(header_name(file, item, "signature_header"));
    } else if (headers.IsSequence()) {
        fail_at(file, headers, "signature_header: a header name or a list of them");
    } else {
        spec.signature_headers.push_back(header_name(file, headers, "signature_header"));
    }
    if (!spec.signature_headers.empty()) spec.signature_header = spec.signature_headers.front();
    read_signature_items(file, node, spec);
    if (node["prefix"]) spec.prefix = scalar(file, node["prefix"], "prefix");
    read_construction(file, node, spec);
    detail::read_message(file, node, spec);
    read_timestamp(file, node, spec);
    if (node["id_header"]) spec.id_header = header_name(file, node["id_header"], "id_header");
    if (spec.message.find("{id}") != std::string::npos && spec.id_header.empty())
        fail_at(file, node["message"], "message signs {id}: give id_header");
    read_detect(file, node, spec);
    read_require(file, node, spec);
    return spec;
}

} // namespace

namespace {

std::vector<ProviderSpec> read_provider_specs(std::string_view text, const std::string& origin) {
    auto document = idem::detail::load_yaml(text, origin);
    std::vector<ProviderSpec> specs;
    if (document.IsSequence()) {
        for (const auto& node : document)
            specs.push_back(parse_one(origin, node));
    } else {
        specs.push_back(parse_one(origin, document));
    }
    return specs;
}

} // namespace

std::vector<ProviderSpec> parse_provider_specs(std::string_view text, const std::string& origin) {
    return idem::detail::interpret_yaml(origin, [&] { return read_provider_specs(text, origin); });
}

std::vector<ProviderSpec> load_provider_specs(const std::vector<std::filesystem::path>& paths) {
    std::vector<std::filesystem::path> files;
    for (const auto& path : paths) {
        std::error_code error;
        if (!std::filesystem::is_directory(path, error)) {
            files.push_back(path);
            continue;
        }
        std::vector<std::filesystem::path> in_directory;
        for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
            auto extension = entry.path().extension().string();
            if (entry.is_regular_file() &&
                (extension == ".json" || extension == ".yaml" || extension == ".yml"))
                in_directory.push_back(entry.path());
        }
        if (in_directory.empty())
            throw UsageError(fmt::format("--provider-file {}: no .json, .yaml or .yml file in it",
                                         quote(path.string())));
        std::sort(in_directory.begin(), in_directory.end());
        files.insert(files.end(), in_directory.begin(), in_directory.end());
    }
    auto built_in = scheme_names();
    std::vector<ProviderSpec> specs;
    std::map<std::string, std::string> origin_of; // name -> the file that defined it
    for (const auto& file : files) {
        auto text = idem::detail::read_config_file(file.string(), "provider");
        for (auto& spec : parse_provider_specs(text, file.string())) {
            if (std::find(built_in.begin(), built_in.end(), spec.name) != built_in.end())
                throw UsageError(fmt::format("{}: provider {} has the name of a built-in scheme: "
                                             "give it another",
                                             file.string(), quote(spec.name)));
            auto [first, added] = origin_of.try_emplace(spec.name, file.string());
            if (!added)
                throw UsageError(fmt::format("{}: provider {} is defined twice (first in {})",
                                             file.string(), quote(spec.name), first->second));
            specs.push_back(std::move(spec));
        }
    }
    return specs;
}

ProviderDetection detect_provider(const std::vector<ProviderSpec>& specs,
                                  const record::Envelope& envelope) {
    ProviderDetection found;
    std::size_t most = 0;
    for (const auto& spec : specs) {
        // A built-in scheme's customer, or a body-signed provider: by name only.
        if (spec.builtin || spec.detect.empty()) continue;
        bool all = std::all_of(spec.detect.begin(), spec.detect.end(), [&](const auto& wanted) {
            auto value = envelope.header(wanted.name);
            if (!value || wanted.value.empty()) return value.has_value();
            auto text = trim(*value);
            if (wanted.prefix) text = text.substr(0, wanted.value.size());
            return iequals(text, wanted.value);
        });
        if (!all || spec.detect.size() < most) continue;
        if (spec.detect.size() > most) found.candidates.clear();
        most = spec.detect.size();
        found.candidates.push_back(&spec);
    }
    if (found.candidates.size() == 1) found.spec = found.candidates.front();
    return found;
}

} // namespace idem::verify
