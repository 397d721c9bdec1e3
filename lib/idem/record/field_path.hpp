#pragma once
// Field paths address values in a record (docs/records.md):
//   data.object.id        dotted, with array indexes: items.0.sku
//   /data/object/id       JSON Pointer (RFC 6901), for keys that hold dots
//   headers.X-GitHub-Delivery   an envelope's header, case-insensitive
//   body.data.id          into an envelope's JSON body
// In a plain event every path starts at the event itself.

#include <string>
#include <string_view>
#include <vector>

namespace idem::record {

class FieldPath {
public:
    // A path of these segments, each a name as it is ('.', '/' and '~' in
    // it kept): written as a JSON Pointer.
    static FieldPath of_segments(const std::vector<std::string>& segments);
    // Throws UsageError for an empty path or a malformed pointer escape.
    static FieldPath parse(std::string_view text);
    // Parses a comma-separated list ("data.object.id,type").
    static std::vector<FieldPath> parse_list(std::string_view text);

    [[nodiscard]] const std::vector<std::string>& segments() const { return m_segments; }
    [[nodiscard]] const std::string& text() const { return m_text; }

private:
    std::string m_text;
    std::vector<std::string> m_segments;
};

} // namespace idem::record
