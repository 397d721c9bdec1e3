#include "idem/run/input_format.hpp"

#include <nlohmann/json.hpp>
#include <optional>

namespace idem::run {

namespace {

std::string_view trimmed(std::string_view text) {
    if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);
    auto first = text.find_first_not_of(" \t\r\n");
    return first == std::string_view::npos ? std::string_view() : text.substr(first);
}

std::string_view trimmed_end(std::string_view text) {
    auto last = text.find_last_not_of(" \t\r");
    return last == std::string_view::npos ? std::string_view() : text.substr(0, last + 1);
}

std::string_view line_at(std::string_view text, std::size_t& from) {
    auto end = text.find('\n', from);
    auto line = text.substr(from, end == std::string_view::npos ? text.npos : end - from);
    from = end == std::string_view::npos ? text.size() : end + 1;
    return line;
}

nlohmann::json object_on(std::string_view line) {
    auto parsed = nlohmann::json::parse(line, nullptr, false);
    return parsed.is_object() ? parsed : nlohmann::json();
}

// A one-line document that is a page of records, not one record: a "data"
// array, and what list APIs put beside it: Stripe's "object": "list", or a
// cursor to the next page (Stripe's has_more, Svix's iterator and done,
// others' next or cursor).
bool is_list_page(const nlohmann::json& object) {
    auto data = object.find("data");
    if (data == object.end() || !data->is_array()) return false;
    auto kind = object.find("object");
    if (kind != object.end() && *kind == "list") return true;
    for (const char* cursor : {"has_more", "iterator", "prevIterator", "done", "next",
                               "next_cursor", "cursor", "next_page", "pagination"})
        if (object.contains(cursor)) return true;
    return false;
}

// Whether `text` is the start of one JSON value, cut short: what a
// document written over several lines is, and a run of broken NDJSON lines
// (`{"id": 1` twice) is not.
class PrefixCheck final : public nlohmann::json_sax<nlohmann::json> {
public:
    explicit PrefixCheck(std::size_t size) : m_size(size) {}
    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool start_object(std::size_t) override { return true; }
    bool key(string_t&) override { return true; }
    bool end_object() override { return true; }
    bool start_array(std::size_t) override { return true; }
    bool end_array() override { return true; }
    bool parse_error(std::size_t position, const std::string&,
                     const nlohmann::detail::exception&) override {
        m_cut_short = position >= m_size;
        return false;
    }
    [[nodiscard]] bool cut_short() const { return m_cut_short; }

private:
    std::size_t m_size;
    bool m_cut_short = false;
};

bool starts_one_value(std::string_view text) {
    PrefixCheck check(text.size());
    nlohmann::json::sax_parse(text, &check);
    return check.cut_short();
}

// The first line after `from` that holds more than blanks, and whether it
// was seen whole (a newline ends it, or the input ended before
// k_detect_bytes); nullopt when none was seen.
struct SeenLine {
    std::string_view text;
    bool whole = false;
};

std::optional<SeenLine> next_filled_line(std::string_view text, std::size_t from) {
    while (from < text.size()) {
        auto end = text.find('\n', from);
        auto line =
            trimmed(text.substr(from, end == std::string_view::npos ? text.npos : end - from));
        if (!line.empty())
            return SeenLine{line, end != std::string_view::npos || text.size() < k_detect_bytes};
        if (end == std::string_view::npos) break;
        from = end + 1;
    }
    return std::nullopt;
}

bool is_har(const nlohmann::json& object) {
    auto log = object.find("log");
    return log != object.end() && log->is_object() && log->contains("entries");
}

} // namespace

InputFormat detect_input_format(std::string_view first, char csv_delimiter) {
    auto text = trimmed(first);
    if (text.empty()) return InputFormat::ndjson;
    if (text.front() == '[') return InputFormat::json;
    std::size_t at = 0;
    auto first_line = line_at(text, at);
    bool has_second_line = at < text.size();
    auto second_line = next_filled_line(text, at);
    // An object starting the next line that holds anything: NDJSON,
    // whatever the first holds (a line cut short by a log rotation, a comma
    // in it or not), even when that object is too long to be seen whole.
    if (second_line && second_line->text.starts_with('{') &&
        (!second_line->whole || object_on(second_line->text).is_object()))
        return InputFormat::ndjson;
    if (text.front() == '{') {
        auto object = object_on(first_line);
        if (object.is_object()) {
            // One whole object on its first line: NDJSON, unless it is a
            // whole HAR export or a list page written on one line.
            if (is_har(object)) return InputFormat::har;
            if (is_list_page(object)) return InputFormat::json;
            return InputFormat::ndjson;
        }
        // An object over several lines: a JSON document. Its first lines
        // are the start of one value; broken lines of a log are not, nor
        // is a first line too long to see the end of (a record to reject).
        if (!has_second_line || !starts_one_value(text.substr(0, at))) return InputFormat::ndjson;
        return text.find("\"log\"") != std::string_view::npos ? InputFormat::har
                                                              : InputFormat::json;
    }
    // CSV needs a header and, after it, a row seen whole that is not JSON:
    // the rest of a log whose first line a rotation cut (a comma in it,
    // often a closing brace) must never be read as rows.
    auto header = trimmed_end(first_line);
    if (header.find(csv_delimiter) == std::string_view::npos || header.ends_with('}'))
        return InputFormat::ndjson;
    if (!second_line)
        return has_second_line && text.size() >= k_detect_bytes
                   ? InputFormat::ndjson
                   : InputFormat::csv; // a header alone, or blank lines after it
    if (!second_line->whole || second_line->text.starts_with('{') ||
        second_line->text.starts_with('['))
        return InputFormat::ndjson;
    return InputFormat::csv;
}

} // namespace idem::run
