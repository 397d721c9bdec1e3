#include "idem/record/parser.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/detail/canonical_writer.hpp"
#include "idem/record/detail/json_errors.hpp"
#include "idem/record/path_census.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <charconv>
#include <deque>
#include <fmt/format.h>
#include <limits>
#include <nlohmann/json.hpp>
#include <simdjson.h>

namespace idem::record {

std::optional<std::string_view> Envelope::header(std::string_view name) const {
    for (const auto& h : headers)
        if (iequals(h.name, name)) return h.value;
    return std::nullopt;
}

struct RecordParser::Impl {
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    RecordShape shape = RecordShape::plain_event;
    bool has_annotations = false;
    Envelope envelope;
    std::string decoded_body;
    // Per-record scratch that views handed out point into.
    std::deque<std::string> scratch;
    // The record's canonical event, its capacity kept from record to record
    // (a second call for the same record goes to scratch).
    std::string canonical;
    bool canonical_used = false;
    // The envelope body parsed as JSON, on first use per record.
    simdjson::dom::parser body_parser;
    simdjson::padded_string body_copy;
    std::optional<simdjson::dom::element> body_root;
    bool body_parsed = false;

    std::optional<ParseFailure> read_members();
    std::optional<simdjson::dom::element> parsed_body();
    std::optional<simdjson::dom::element> event();
    FieldValue to_field_value(simdjson::dom::element element);
    std::optional<simdjson::dom::element> locate(const FieldPath& path);
    // "headers.<name>" in an envelope: a captured header, not a JSON element.
    [[nodiscard]] bool names_a_header(const FieldPath& path) const {
        const auto& segments = path.segments();
        return shape == RecordShape::envelope && segments.size() == 2 && segments[0] == "headers";
    }
};

RecordParser::RecordParser() : m_impl(std::make_unique<Impl>()) {}
RecordParser::~RecordParser() = default;

namespace {
constexpr std::string_view k_utf8_bom = "\xEF\xBB\xBF";
} // namespace

std::string_view event_text(std::string_view line) {
    if (line.starts_with(k_utf8_bom)) line.remove_prefix(k_utf8_bom.size());
    if (line.ends_with('\r')) line.remove_suffix(1);
    return line;
}

std::optional<ParseFailure> RecordParser::parse(std::string_view line) {
    auto& impl = *m_impl;
    impl.scratch.clear();
    impl.canonical_used = false;
    impl.body_parsed = false;
    impl.body_root.reset();
    impl.has_annotations = false;
    impl.shape = RecordShape::plain_event;
    // A UTF-8 byte order mark (an editor's, a Windows tool's) is read past;
    // it stays in the record's bytes, so the output keeps it.
    std::size_t bom_bytes = line.starts_with(k_utf8_bom) ? k_utf8_bom.size() : 0;
    line.remove_prefix(bom_bytes);
    auto error =
        impl.parser.parse(reinterpret_cast<const uint8_t*>(line.data()), line.size(), false)
            .get(impl.root);
    if (error != simdjson::SUCCESS) {
        auto failure = describe_json_error(line);
        if (failure.column > 0) failure.column += bom_bytes;
        return failure;
    }
    if (!impl.root.is_object())
        return ParseFailure{1, "expected a JSON object per line, got a JSON " +
                                   std::string(impl.root.is_array() ? "array" : "scalar")};
    auto failure = impl.read_members();
    if (!failure && m_census) m_census->observe(*this);
    return failure;
}

namespace {
void collect_paths(simdjson::dom::element element, std::string& prefix,
                   std::vector<std::string>& out, std::size_t max, int depth) {
    if (!element.is_object() || depth > 8) return;
    for (auto [key, value] : simdjson::dom::object(element)) {
        if (out.size() >= max) return;
        auto length = prefix.size();
        if (!prefix.empty()) prefix += '.';
        prefix += key;
        out.push_back(prefix);
        collect_paths(value, prefix, out, max, depth + 1);
        prefix.resize(length);
    }
}
} // namespace

void RecordParser::field_paths(std::vector<std::string>& out, std::size_t max) {
    auto& impl = *m_impl;
    std::string prefix;
    collect_paths(impl.root, prefix, out, max, 0);
    if (impl.shape == RecordShape::envelope) {
        for (const auto& header : impl.envelope.headers)
            if (out.size() < max) out.push_back("headers." + to_lower(header.name));
        if (auto body = impl.parsed_body()) {
            prefix = "body";
            collect_paths(*body, prefix, out, max, 1);
        }
    }
}

// One pass over the top-level members: the envelope's fields are picked up
// as they come, instead of one key lookup per field.
std::optional<ParseFailure> RecordParser::Impl::read_members() {
    envelope.headers.clear();
    envelope.id = envelope.method = envelope.path = envelope.received_at = envelope.body = {};
    std::optional<simdjson::dom::element> id, method, path, path_b64, received_at, headers, body,
        body_b64;
    bool is_envelope = false;
    for (auto member : simdjson::dom::object(root)) {
        auto key = member.key;
        if (key == "idem")
            is_envelope = true;
        else if (key == "_idem") {
            // idem's findings go into this object; a record whose "_idem" is
            // something else would lose that value, so it is set aside whole.
            if (!member.value.is_object())
                return ParseFailure{0, "member '_idem' is not an object: idem writes its findings "
                                       "there, so it would be lost; rename it"};
            has_annotations = true;
        } else if (key == "id")
            id = member.value;
        else if (key == "method")
            method = member.value;
        else if (key == "path")
            path = member.value;
        else if (key == "received_at")
            received_at = member.value;
        else if (key == "headers")
            headers = member.value;
        else if (key == "body")
            body = member.value;
        else if (key == "body_b64")
            body_b64 = member.value;
        else if (key == "path_b64")
            path_b64 = member.value;
    }
    if (!is_envelope) return std::nullopt;
    shape = RecordShape::envelope;
    auto fail = [](std::string message) { return ParseFailure{0, std::move(message)}; };
    if (id && id->is_number()) {
        scratch.emplace_back(simdjson::minify(*id));
        envelope.id = scratch.back();
    } else if (id && !id->is_string()) {
        return fail("envelope field 'id' must be a string");
    } else if (id) {
        envelope.id = std::string_view(*id);
    }
    struct Text {
        const char* name;
        const std::optional<simdjson::dom::element>& value;
        std::string_view& target;
    };
    for (const auto& field :
         {Text{"method", method, envelope.method}, Text{"path", path, envelope.path},
          Text{"received_at", received_at, envelope.received_at}}) {
        if (!field.value) continue;
        if (!field.value->is_string())
            return fail(fmt::format("envelope field '{}' must be a string", field.name));
        field.target = std::string_view(*field.value);
    }
    // A path or header value that is not UTF-8 has its raw bytes in base64
    // beside the readable text (docs/records.md): those are the request's.
    auto raw_bytes = [&](simdjson::dom::element encoded) -> std::optional<std::string_view> {
        std::string decoded;
        if (!encoded.is_string() || !base64_decode_into(std::string_view(encoded), decoded))
            return std::nullopt;
        scratch.push_back(std::move(decoded));
        return std::string_view(scratch.back());
    };
    if (path_b64) {
        auto raw = raw_bytes(*path_b64);
        if (!raw) return fail("envelope field 'path_b64' must be a base64 string");
        envelope.path = *raw;
    }
    if (headers) {
        if (!headers->is_array())
            return fail("envelope field 'headers' must be an array of [name, value] pairs");
        for (auto pair : simdjson::dom::array(*headers)) {
            simdjson::dom::array items;
            if (pair.get(items) != simdjson::SUCCESS || items.size() < 2 || items.size() > 3 ||
                !items.at(0).is_string() || !items.at(1).is_string())
                return fail("envelope field 'headers' must be an array of [name, value] pairs "
                            "(or [name, value, base64 of the raw value])");
            auto item = items.begin();
            std::string_view name = *item;
            ++item;
            std::string_view value = *item;
            if (items.size() == 3) {
                auto raw = raw_bytes(*++item);
                if (!raw)
                    return fail(
                        fmt::format("the raw value of header {} must be base64", quote(name, 40)));
                value = *raw;
            }
            envelope.headers.push_back({name, value});
        }
    }
    if (body) {
        if (!body->is_string())
            return fail("envelope field 'body' must be a string holding the raw body");
        envelope.body = std::string_view(*body);
    } else if (body_b64) {
        if (!body_b64->is_string() ||
            !base64_decode_into(std::string_view(*body_b64), decoded_body))
            return fail("envelope field 'body_b64' must be a base64 string");
        envelope.body = decoded_body;
    }
    return std::nullopt;
}

RecordShape RecordParser::shape() const {
    return m_impl->shape;
}
const Envelope& RecordParser::envelope() const {
    return m_impl->envelope;
}
bool RecordParser::has_annotations() const {
    return m_impl->has_annotations;
}

namespace {

bool is_form_body(const Envelope& envelope) {
    auto type = envelope.header("Content-Type");
    return type &&
           iequals(trim(type->substr(0, type->find(';'))), "application/x-www-form-urlencoded");
}

// A form body read as the JSON object its fields make (docs/dedup.md):
// {"name":"value"}, form-decoded strings, and a repeated name's values as an
// array in the order they came. Its canonical form then sorts the names.
std::string form_as_json(std::string_view body) {
    std::vector<std::pair<std::string, std::vector<std::string>>> fields;
    for (auto& [name, value] : parse_form(body)) {
        auto& field_name = name; // a lambda captures no structured binding in clang 14
        auto same = std::find_if(fields.begin(), fields.end(),
                                 [&](const auto& field) { return field.first == field_name; });
        if (same == fields.end()) {
            fields.emplace_back(std::move(name), std::vector<std::string>{});
            same = fields.end() - 1;
        }
        same->second.push_back(std::move(value));
    }
    std::string object = "{";
    for (const auto& [name, values] : fields) {
        if (object.size() > 1) object += ',';
        append_json_string(object, name);
        object += ':';
        if (values.size() == 1) {
            append_json_string(object, values.front());
            continue;
        }
        object += '[';
        for (std::size_t i = 0; i < values.size(); ++i) {
            if (i > 0) object += ',';
            append_json_string(object, values[i]);
        }
        object += ']';
    }
    object += '}';
    return object;
}

} // namespace

std::optional<simdjson::dom::element> RecordParser::Impl::parsed_body() {
    if (!body_parsed) {
        body_parsed = true;
        // A form-encoded body (Twilio, Slack commands, many older providers)
        // is its fields; anything else must be JSON to have paths.
        body_copy = simdjson::padded_string(is_form_body(envelope) ? form_as_json(envelope.body)
                                                                   : std::string(envelope.body));
        simdjson::dom::element element;
        if (body_parser.parse(body_copy).get(element) == simdjson::SUCCESS) body_root = element;
    }
    return body_root;
}

FieldValue RecordParser::Impl::to_field_value(simdjson::dom::element element) {
    using simdjson::dom::element_type;
    FieldValue value;
    std::string text;
    switch (element.type()) {
    case element_type::STRING:
        value.type = FieldValue::Type::string;
        value.text = std::string_view(element);
        return value;
    case element_type::NULL_VALUE:
        value.type = FieldValue::Type::null;
        text = "null";
        break;
    case element_type::BOOL:
        value.type = FieldValue::Type::boolean;
        text = bool(element) ? "true" : "false";
        break;
    case element_type::INT64:
    case element_type::UINT64:
    case element_type::DOUBLE:
        value.type = FieldValue::Type::number;
        detail::write_canonical_number(element, text);
        break;
    case element_type::OBJECT:
    case element_type::ARRAY:
        value.type = element.is_object() ? FieldValue::Type::object : FieldValue::Type::array;
        detail::write_canonical(element, {}, 0, text);
        break;
    }
    scratch.push_back(std::move(text));
    value.text = scratch.back();
    return value;
}

std::optional<FieldValue> RecordParser::find(const FieldPath& path) {
    auto& impl = *m_impl;
    if (impl.names_a_header(path)) {
        auto header = impl.envelope.header(path.segments()[1]);
        if (!header) return std::nullopt;
        return FieldValue{FieldValue::Type::string, *header};
    }
    auto element = impl.locate(path);
    if (!element) return std::nullopt;
    return impl.to_field_value(*element);
}

std::optional<std::int64_t> RecordParser::find_integer(const FieldPath& path) {
    auto& impl = *m_impl;
    if (impl.names_a_header(path)) return std::nullopt; // a header is text
    auto element = impl.locate(path);
    if (!element) return std::nullopt;
    if (element->type() == simdjson::dom::element_type::INT64) {
        auto value = std::int64_t(*element);
        if (value >= 0) return value;
    } else if (element->type() == simdjson::dom::element_type::UINT64) {
        auto value = std::uint64_t(*element);
        if (value <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
            return static_cast<std::int64_t>(value);
    }
    return std::nullopt;
}

// The element a path names in the last parsed record (inside an envelope,
// "body.x" is x in the parsed body; "headers.x" is not an element: the
// callers look headers up first).
std::optional<simdjson::dom::element> RecordParser::Impl::locate(const FieldPath& path) {
    const auto& segments = path.segments();
    std::size_t start = 0;
    simdjson::dom::element current = root;
    if (shape == RecordShape::envelope && segments.size() > 1 && segments[0] == "body") {
        auto body = parsed_body();
        if (!body) return std::nullopt;
        current = *body;
        start = 1;
    }
    for (std::size_t i = start; i < segments.size(); ++i) {
        const auto& segment = segments[i];
        if (current.is_object()) {
            if (simdjson::dom::object(current).at_key(segment).get(current) != simdjson::SUCCESS)
                return std::nullopt;
        } else if (current.is_array()) {
            std::size_t index = 0;
            auto [end, error] =
                std::from_chars(segment.data(), segment.data() + segment.size(), index);
            if (error != std::errc{} || end != segment.data() + segment.size()) return std::nullopt;
            if (simdjson::dom::array(current).at(index).get(current) != simdjson::SUCCESS)
                return std::nullopt;
        } else {
            return std::nullopt;
        }
    }
    return current;
}

IgnoredPaths::IgnoredPaths(const std::vector<FieldPath>& paths) {
    m_plain.paths = paths;
    for (const auto& path : paths) {
        if (path.segments().size() > 1 && path.segments()[0] == "body")
            m_in_body.paths.push_back(FieldPath::parse(std::string_view(path.text()).substr(5)));
        else
            m_in_body.paths.push_back(path);
    }
    for (auto* applying : {&m_plain, &m_in_body}) {
        for (const auto& path : applying->paths)
            applying->pointers.push_back(&path);
        applying->top = detail::IgnoredNames(applying->pointers, 0);
    }
}

// The event: a plain record itself, an envelope's parsed body.
std::optional<simdjson::dom::element> RecordParser::Impl::event() {
    if (shape != RecordShape::envelope) return root;
    return parsed_body();
}

std::optional<std::string_view>
RecordParser::canonical_event(const std::vector<FieldPath>& ignored) {
    return canonical_event(IgnoredPaths(ignored));
}

std::optional<std::string_view> RecordParser::canonical_event(const IgnoredPaths& ignored) {
    auto& impl = *m_impl;
    auto event = impl.event();
    if (!event) return std::nullopt;
    const auto& applying =
        impl.shape == RecordShape::envelope ? ignored.m_in_body : ignored.m_plain;
    auto& out = impl.canonical_used ? impl.scratch.emplace_back() : impl.canonical;
    impl.canonical_used = true;
    out.clear();
    detail::write_canonical(*event, applying.pointers, 0, out, &applying.top);
    return std::string_view(out);
}

std::optional<std::uint64_t> RecordParser::event_hash(const std::vector<FieldPath>& ignored) {
    return event_hash(IgnoredPaths(ignored));
}

std::optional<std::uint64_t> RecordParser::event_hash(const IgnoredPaths& ignored) {
    auto& impl = *m_impl;
    auto event = impl.event();
    if (!event) return std::nullopt;
    const auto& applying =
        impl.shape == RecordShape::envelope ? ignored.m_in_body : ignored.m_plain;
    return detail::hash_canonical(*event, applying.pointers, 0, &applying.top);
}

ParseFailure describe_json_error(std::string_view line) {
    try {
        [[maybe_unused]] auto ignored = nlohmann::json::parse(line.begin(), line.end());
    } catch (const nlohmann::json::parse_error& error) {
        return ParseFailure{static_cast<std::uint64_t>(error.byte),
                            detail::without_json_prefix(error.what())};
    } catch (const nlohmann::json::out_of_range&) {
        return ParseFailure{0, "a number is too large: idem reads 64-bit integers and doubles"};
    } catch (const std::exception& error) {
        return ParseFailure{0, detail::without_json_prefix(error.what())};
    }
    // Valid JSON to a second parser: what simdjson refused is a number beyond
    // 64 bits, or a string that is not valid UTF-8.
    return ParseFailure{0, "a number is too large (idem reads 64-bit integers and doubles), or a "
                           "string is not valid UTF-8"};
}

} // namespace idem::record
