#include "idem/run/json_elements.hpp"

#include "idem/util/errors.hpp"

#include <fmt/format.h>

namespace idem::run {

namespace {
bool is_blank(char byte) {
    return byte == ' ' || byte == '\t' || byte == '\n' || byte == '\r';
}
bool ends_scalar(char byte) {
    return is_blank(byte) || byte == ',' || byte == ']' || byte == '}';
}
// A key longer than "data" is not "data": only this much of one is kept.
constexpr std::size_t k_key_bytes_kept = 8;
constexpr std::string_view k_byte_order_mark = "\xef\xbb\xbf";
} // namespace

JsonElements::JsonElements(std::string source, std::uint64_t max_element_bytes,
                           io::OversizeHandler* oversize)
    : m_source(std::move(source)), m_max_element_bytes(max_element_bytes), m_oversize(oversize) {}

void JsonElements::fail(const std::string& why) const {
    throw InputError({m_source, m_line, m_column + 1, m_offset}, why);
}

void JsonElements::keep(char byte) {
    if (!m_keeping) return;
    // A line break between tokens is a space: the element stays one line.
    // (Inside a string a raw one is invalid JSON, for the parser to reject.)
    if ((byte == '\n' || byte == '\r') && !m_in_string) byte = ' ';
    ++m_element_bytes;
    if (!m_oversized && m_element_bytes > m_max_element_bytes) {
        m_oversized = true;
        if (m_oversize) {
            m_oversize->begin(m_source);
            m_oversize->chunk(m_element);
        }
        std::string().swap(m_element);
    }
    if (!m_oversized) {
        m_element.push_back(byte);
    } else if (m_oversize) {
        m_oversize->chunk(std::string_view(&byte, 1));
    }
}

void JsonElements::start_value(char byte) {
    m_depth = 0;
    m_in_string = byte == '"';
    m_escaped = false;
    m_scalar = byte != '"' && byte != '{' && byte != '[';
    if (byte == '{' || byte == '[') m_depth = 1;
    keep(byte);
}

bool JsonElements::value_ended_before(char byte) {
    if (m_scalar) {
        if (ends_scalar(byte)) return true;
        keep(byte);
        return false;
    }
    if (m_depth == 0 && !m_in_string) return true; // a string or a closed container ended
    keep(byte);
    if (m_in_string) {
        if (m_escaped)
            m_escaped = false;
        else if (byte == '\\')
            m_escaped = true;
        else if (byte == '"')
            m_in_string = false;
        return false;
    }
    if (byte == '"') {
        m_in_string = true;
    } else if (byte == '{' || byte == '[') {
        // The page's object and the array hold the element: two levels.
        if (++m_depth + 2 > k_max_json_depth)
            fail(fmt::format("nested deeper than {} levels", k_max_json_depth));
    } else if (byte == '}' || byte == ']') {
        --m_depth;
    }
    return false;
}

void JsonElements::end_element(std::string& lines) {
    ++m_elements;
    if (!m_oversized) {
        lines.append(m_element);
        lines.push_back('\n');
    }
    m_element.clear();
}

JsonFeed JsonElements::feed(std::string_view bytes, std::string& lines) {
    JsonFeed result;
    for (std::size_t at = 0; at < bytes.size();) {
        char byte = bytes[at];
        bool consumed = true;
        switch (m_phase) {
        case Phase::start:
            // A byte order mark before the document, in as many feeds as it comes.
            if (m_offset < k_byte_order_mark.size() && byte == k_byte_order_mark[m_offset]) break;
            if (is_blank(byte)) break;
            if (byte == '[') {
                m_array_empty = true;
                m_phase = Phase::array_item;
            } else if (byte == '{') {
                m_page = true;
                m_phase = Phase::page_member;
            } else {
                fail("not a JSON array or a page of records (and not NDJSON: its first line is "
                     "not a whole object)");
            }
            break;
        case Phase::page_member:
        case Phase::page_after_data:
            if (is_blank(byte)) break;
            if (byte == '}' && (m_member_seen || !m_seen_data)) {
                if (!m_seen_data)
                    fail("a JSON object over several lines that is neither a HAR export nor a "
                         "page with a \"data\" array of records: give --input-format");
                m_phase = Phase::done;
            } else if (byte == ',' && m_member_seen) {
                m_member_seen = false;
            } else if (byte == '"' && !m_member_seen) {
                m_key.clear();
                m_key_escaped = false;
                m_phase = Phase::page_key;
            } else {
                fail(fmt::format("expected a member of the page, got '{}'", byte));
            }
            break;
        case Phase::page_key:
            if (m_key_escaped) {
                m_key_escaped = false;
            } else if (byte == '\\') {
                m_key_escaped = true;
            } else if (byte == '"') {
                m_phase = Phase::page_colon;
                break;
            }
            if (m_key.size() <= k_key_bytes_kept) m_key.push_back(byte);
            break;
        case Phase::page_colon:
            if (is_blank(byte)) break;
            if (byte != ':')
                fail(fmt::format("expected ':' after a member's name, got '{}'", byte));
            m_phase = Phase::page_value;
            break;
        case Phase::page_value:
            if (is_blank(byte)) break;
            m_member_seen = true;
            if (m_key == "data" && !m_seen_data) {
                if (byte != '[')
                    fail("the page's \"data\" is not an array of records: give --input-format");
                m_seen_data = true;
                m_array_empty = true;
                m_phase = Phase::array_item;
                break;
            }
            m_keeping = false;
            start_value(byte);
            m_phase = Phase::skip_value;
            break;
        case Phase::skip_value:
            if (value_ended_before(byte)) {
                m_phase = m_seen_data ? Phase::page_after_data : Phase::page_member;
                consumed = false;
            }
            break;
        case Phase::array_item:
            if (is_blank(byte)) break;
            if (byte == ']' && m_array_empty) {
                m_phase = m_page ? Phase::page_after_data : Phase::done;
                break;
            }
            if (byte == ',' || byte == ']' || byte == '}' || byte == ':')
                fail(fmt::format("expected an element of the array, got '{}'", byte));
            m_keeping = true;
            m_element_bytes = 0;
            m_oversized = false;
            start_value(byte);
            m_phase = Phase::element;
            break;
        case Phase::element:
            if (value_ended_before(byte)) {
                bool oversized = m_oversized;
                if (oversized && m_oversize) m_oversize->end();
                end_element(lines);
                m_keeping = false;
                m_phase = Phase::array_after;
                consumed = false;
                if (oversized) {
                    result.consumed = at;
                    result.oversized_bytes = m_element_bytes;
                    return result;
                }
            }
            break;
        case Phase::array_after:
            if (is_blank(byte)) break;
            if (byte == ',') {
                m_array_empty = false; // "[1,]" is no array: an element must follow
                m_phase = Phase::array_item;
            } else if (byte == ']') {
                m_phase = m_page ? Phase::page_after_data : Phase::done;
            } else {
                fail(fmt::format("expected ',' or ']' after an element, got '{}'", byte));
            }
            break;
        case Phase::done:
            if (!is_blank(byte)) fail("more after the end of the JSON document");
            break;
        }
        if (!consumed) continue;
        ++at;
        ++m_offset;
        if (byte == '\n') {
            ++m_line;
            m_column = 0;
        } else {
            ++m_column;
        }
    }
    result.consumed = bytes.size();
    return result;
}

void JsonElements::finish() const {
    if (m_phase == Phase::done) return;
    if (m_phase == Phase::start) fail("the JSON document is empty");
    fail("the JSON document is cut short: it ends inside its array");
}

} // namespace idem::run
