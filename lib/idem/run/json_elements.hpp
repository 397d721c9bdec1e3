#pragma once
// A JSON array of records, or a page of them (`{"data": [...]}`, as list
// APIs and exports write), read element by element as its bytes arrive:
// memory follows the largest element, never the document
// (docs/records.md, "Budgets"). Each element becomes one line, its bytes
// as the document has them (line breaks between tokens made spaces), for
// the record parser to accept or reject like any NDJSON line.

#include "idem/io/block_reader.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idem::run {

// Deeper than this, a document is refused (exit 3 with its position), as
// the record parser refuses a line nested as deeply.
inline constexpr std::size_t k_max_json_depth = 1024;

struct JsonFeed {
    std::size_t consumed = 0;
    // Non-zero: an element longer than the limit ended at `consumed`; its
    // bytes went to the oversize handler, and the block ends with it.
    std::uint64_t oversized_bytes = 0;
};

class JsonElements {
public:
    // `source` names the document in errors; `max_element_bytes` is
    // --max-record-size; `oversize` receives an element past it (may be
    // null: then its bytes are dropped and only its size is told).
    JsonElements(std::string source, std::uint64_t max_element_bytes,
                 io::OversizeHandler* oversize);

    // Reads the document's next bytes, appending each element that ends
    // in them to `lines`, newline-terminated. Stops after an oversized
    // element. Throws InputError (file:line:column) for a document that is
    // not an array or a page of records, or is nested too deeply.
    JsonFeed feed(std::string_view bytes, std::string& lines);
    // After the last byte: throws InputError when the document is cut short.
    void finish() const;
    [[nodiscard]] std::uint64_t elements() const { return m_elements; }

private:
    enum class Phase {
        start,           // before the first token
        page_member,     // in the page: before a key, a ',' or '}'
        page_key,        // in a key's string
        page_colon,      // after a key
        page_value,      // before a member's value
        skip_value,      // in a member's value that is not "data"
        array_item,      // in the array: before an element or ']'
        element,         // in an element
        array_after,     // after an element: ',' or ']'
        page_after_data, // after the data array: the page's other members
        done,            // the document ended
    };

    [[noreturn]] void fail(const std::string& why) const;
    // One byte of a value being scanned (an element or a skipped member):
    // true when the value ended before this byte (which is then not part of
    // it and must be looked at again).
    bool value_ended_before(char byte);
    void start_value(char byte);
    void keep(char byte);
    void end_element(std::string& lines);

    std::string m_source;
    std::uint64_t m_max_element_bytes;
    io::OversizeHandler* m_oversize;
    Phase m_phase = Phase::start;
    bool m_page = false;        // the document is an object with a "data" array
    bool m_seen_data = false;   // ... which was found
    bool m_member_seen = false; // in the page: a member read, ',' or '}' next
    bool m_array_empty = true;  // in the array: no element yet, so ']' may close it

    // The value being scanned.
    std::size_t m_depth = 0; // open brackets inside it
    bool m_scalar = false;   // a number or a literal, ended by a delimiter
    bool m_in_string = false;
    bool m_escaped = false;
    bool m_keeping = false; // an element (kept) or a skipped member
    std::string m_element;
    std::uint64_t m_element_bytes = 0;
    bool m_oversized = false;

    std::string m_key; // the page member's key, up to a few bytes
    bool m_key_escaped = false;

    std::uint64_t m_elements = 0;
    std::uint64_t m_line = 1, m_column = 0, m_offset = 0; // of the byte being read
};

} // namespace idem::run
