#pragma once
// Parses one NDJSON record (a plain event or a delivery envelope, see
// docs/records.md) with full validation. Everything handed out is a view into
// the parser's own buffers: valid until the next parse() call.

#include "idem/record/detail/ignored_names.hpp"
#include "idem/record/field_path.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::record {

struct Header {
    std::string_view name;
    std::string_view value;
};

// A captured HTTP request, as `idem listen` writes it.
struct Envelope {
    std::string_view id;
    std::string_view method;
    std::string_view path; // the request target: path and query
    std::string_view received_at;
    std::vector<Header> headers;
    std::string_view body; // the raw bytes: decoded from body_b64 when present

    // The first header of that name, compared case-insensitively.
    [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
};

enum class RecordShape { plain_event, envelope };

// Paths left out of an event (canonical_event, event_hash), made ready once
// for many records: as they apply to a plain event, and inside an envelope's
// body, where "body.x" and "x" both name x. Movable, not copyable (it points
// into itself).
class IgnoredPaths {
public:
    IgnoredPaths() = default;
    explicit IgnoredPaths(const std::vector<FieldPath>& paths);
    IgnoredPaths(IgnoredPaths&&) = default;
    IgnoredPaths& operator=(IgnoredPaths&&) = default;
    IgnoredPaths(const IgnoredPaths&) = delete;
    IgnoredPaths& operator=(const IgnoredPaths&) = delete;

private:
    friend class RecordParser;
    struct Applying {
        std::vector<FieldPath> paths;
        std::vector<const FieldPath*> pointers;
        detail::IgnoredNames top; // the names at the event's top level
    };
    Applying m_plain, m_in_body;
};

// Why a line is not a record, and where (1-based column, 0 if unknown).
struct ParseFailure {
    std::uint64_t column = 0;
    std::string message;
};

// A value found by a field path.
struct FieldValue {
    enum class Type { null, boolean, number, string, object, array };
    Type type = Type::null;
    // string: the unescaped text; number/boolean/null: the canonical spelling;
    // object/array: canonical JSON (docs/canonical-json.md).
    std::string_view text;
};

class PathCensus;

class RecordParser {
public:
    RecordParser();
    ~RecordParser();
    RecordParser(const RecordParser&) = delete;
    RecordParser& operator=(const RecordParser&) = delete;

    // `line` must be followed by io::k_padding_bytes readable bytes.
    // Returns a failure (never throws) for anything that is not one JSON object.
    std::optional<ParseFailure> parse(std::string_view line);

    [[nodiscard]] RecordShape shape() const;
    // Only meaningful when shape() is envelope.
    [[nodiscard]] const Envelope& envelope() const;
    // True when the record already carries a top-level "_idem" member.
    [[nodiscard]] bool has_annotations() const;

    // Looks a path up in the last parsed record; nullopt when it is missing.
    std::optional<FieldValue> find(const FieldPath& path);

    // The path's value when it is a JSON integer from 0 to 2^63-1, read as
    // the number it is; nullopt for anything else (missing, a string, a
    // negative or fractional number), which find() then describes. For
    // sequence numbers and versions read per record: find() writes a
    // number's canonical text, and reading that text back cost as much as
    // the lookup.
    std::optional<std::int64_t> find_integer(const FieldPath& path);

    // Canonical JSON of the whole event (an envelope's parsed body), with the
    // `ignored` paths removed. Throws nothing: a body that is not JSON yields
    // nullopt.
    std::optional<std::string_view> canonical_event(const std::vector<FieldPath>& ignored);
    std::optional<std::string_view> canonical_event(const IgnoredPaths& ignored);

    // A 64-bit hash of what canonical_event would write (equal forms hash
    // equal), without writing it: for comparing payloads, not for keys that
    // must stay stable across versions (those hash the canonical text).
    std::optional<std::uint64_t> event_hash(const std::vector<FieldPath>& ignored);
    std::optional<std::uint64_t> event_hash(const IgnoredPaths& ignored);

    // Every record parsed from here on is shown to `census` (the run
    // frame's): the paths the run was given are checked against it.
    void report_paths_to(PathCensus* census) { m_census = census; }
    // The dotted paths of the last record's object members (an envelope's
    // parsed body under "body."), at most `max` of them, for "did you mean".
    void field_paths(std::vector<std::string>& out, std::size_t max);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    PathCensus* m_census = nullptr;
};

// A plain event's own text, for use as a body: the line without a leading
// UTF-8 byte order mark and without the CR of a CRLF line. (Lines keep both,
// so that output is byte for byte; the event they hold has neither.)
[[nodiscard]] std::string_view event_text(std::string_view line);

// Exact column and message for a line that failed to parse (slow path: only
// called for bad input).
[[nodiscard]] ParseFailure describe_json_error(std::string_view line);

} // namespace idem::record
