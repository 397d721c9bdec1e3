#pragma once
// Adds idem's annotations to a record without re-serialising it: the bytes
// of the record stay as they came, and one member is spliced in under the
// top-level "_idem" object (created when absent, extended when present).

#include "idem/io/sink.hpp"

#include <string>
#include <string_view>

namespace idem::record {

// The record cut where the annotation goes. Write
//   before, separator, opening, MEMBER, closing, after
// where MEMBER is `"name":value`.
struct AnnotationSplice {
    std::string_view before;
    std::string_view separator; // "," or "" (an empty object)
    std::string_view opening;   // "\"_idem\":{" or "" (inside an existing _idem)
    std::string_view closing;   // "}" or ""
    std::string_view after;
};

// `line` must be one valid JSON object (already parsed).
[[nodiscard]] AnnotationSplice splice_point(std::string_view line, bool has_idem_member);

// Writes the annotated line to `sink` as one record, piece by piece: no
// copy of the line is made.
void write_annotated(io::Sink& sink, std::string_view line, bool has_idem_member,
                     std::string_view member);

// The whole annotated line, for callers off the hot path.
[[nodiscard]] std::string annotate(std::string_view line, bool has_idem_member,
                                   std::string_view member);

// Appends `text` as a JSON string literal (with quotes).
void append_json_string(std::string& out, std::string_view text);

} // namespace idem::record
