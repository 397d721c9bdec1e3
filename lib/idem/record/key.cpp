#include "idem/record/key.hpp"

#include "idem/crypto/crypto.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/canonical.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <cstring>
#include <fmt/format.h>

namespace idem::record {

std::string Fingerprint::hex() const {
    return hex_encode(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

namespace {
char type_tag(record::FieldValue::Type type) {
    using Type = record::FieldValue::Type;
    switch (type) {
    case Type::null:
        return 'n';
    case Type::boolean:
        return 'b';
    case Type::number:
        return 'd';
    case Type::string:
        return 's';
    case Type::object:
        return 'o';
    case Type::array:
        return 'a';
    }
    return '?';
}
} // namespace

namespace {
void append_length(std::string& out, std::size_t length) {
    append_decimal(out, length);
    out += ':';
}
} // namespace

void append_encoded_value(std::string& out, const record::FieldValue& value) {
    out += type_tag(value.type);
    append_length(out, value.text.size());
    out.append(value.text);
}

Fingerprinter::Fingerprinter(KeySpec spec)
    : m_spec(std::move(spec)), m_ignored(m_spec.ignore_paths) {}

KeyOutcome Fingerprinter::fingerprint(record::RecordParser& parser, std::string_view bucket) {
    KeyOutcome outcome;
    m_encoded.assign(k_key_version);
    if (!bucket.empty()) {
        m_encoded += " bucket ";
        m_encoded.append(bucket);
    }
    if (m_spec.key_paths.empty()) {
        // The whole event, in canonical form (idem-canonical/1).
        auto canonical = parser.canonical_event(m_ignored);
        if (!canonical) {
            outcome.missing_path = "body (not JSON)";
            return outcome;
        }
        m_encoded += " event ";
        m_encoded += record::k_canonical_version;
        m_encoded += " c";
        append_length(m_encoded, canonical->size());
        m_encoded.append(*canonical);
    } else {
        m_encoded += " key";
        for (const auto& path : m_spec.key_paths) {
            auto value = parser.find(path);
            if (!value) {
                outcome.missing_path = path.text();
                return outcome;
            }
            m_encoded += ' ';
            append_encoded_value(m_encoded, *value);
        }
    }
    auto digest = crypto::hash(crypto::HashAlgorithm::sha256, m_encoded);
    Fingerprint fingerprint;
    std::memcpy(fingerprint.bytes.data(), digest.bytes.data(), fingerprint.bytes.size());
    outcome.fingerprint = fingerprint;
    return outcome;
}

std::string encoded_values_json(std::string_view encoded, std::size_t paths) {
    if (paths == 0) return "null";
    std::string label = paths > 1 ? "[" : "";
    std::size_t at = 0;
    bool first = true;
    while (at < encoded.size()) {
        if (!first) {
            label += ',';
            ++at; // the separating space
        }
        first = false;
        char tag = encoded[at++];
        std::size_t length = 0;
        auto [end, error] =
            std::from_chars(encoded.data() + at, encoded.data() + encoded.size(), length);
        if (error != std::errc{} || end == encoded.data() + encoded.size()) break;
        at = static_cast<std::size_t>(end - encoded.data()) + 1; // past ':'
        auto text = encoded.substr(at, length);
        at += text.size();
        if (tag == 's')
            record::append_json_string(label, text);
        else
            label.append(text);
    }
    if (paths > 1) label += ']';
    return label;
}

} // namespace idem::record
