#include "idem/record/annotate.hpp"

#include "idem/record/detail/canonical_writer.hpp"

#include <cassert>

namespace idem::record {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

// Index one past the string literal that starts at `at` (a quote).
std::size_t skip_string(std::string_view text, std::size_t at) {
    for (std::size_t i = at + 1; i < text.size(); ++i) {
        if (text[i] == '\\')
            ++i;
        else if (text[i] == '"')
            return i + 1;
    }
    return text.size();
}

// Index one past the JSON value that starts at `at`.
std::size_t skip_value(std::string_view text, std::size_t at) {
    if (text[at] == '"') return skip_string(text, at);
    if (text[at] != '{' && text[at] != '[') {
        std::size_t i = at;
        while (i < text.size() && text[i] != ',' && text[i] != '}' && text[i] != ']' &&
               !is_space(text[i]))
            ++i;
        return i;
    }
    int depth = 0;
    for (std::size_t i = at; i < text.size(); ++i) {
        char c = text[i];
        if (c == '"') {
            i = skip_string(text, i) - 1;
        } else if (c == '{' || c == '[') {
            ++depth;
        } else if (c == '}' || c == ']') {
            if (--depth == 0) return i + 1;
        }
    }
    return text.size();
}

std::size_t skip_spaces(std::string_view text, std::size_t at) {
    while (at < text.size() && is_space(text[at]))
        ++at;
    return at;
}

// Position of the '}' closing the top-level "_idem" object, or npos.
std::size_t find_idem_close(std::string_view line) {
    std::size_t i = skip_spaces(line, 0) + 1; // past the opening '{'
    while (true) {
        i = skip_spaces(line, i);
        if (i >= line.size() || line[i] != '"') return std::string_view::npos;
        auto key_end = skip_string(line, i);
        bool is_idem = line.substr(i, key_end - i) == "\"_idem\"";
        i = skip_spaces(line, key_end) + 1; // past ':'
        i = skip_spaces(line, i);
        auto value_end = skip_value(line, i);
        if (is_idem && line[i] == '{') return value_end - 1;
        i = skip_spaces(line, value_end);
        if (i >= line.size() || line[i] != ',') return std::string_view::npos;
        ++i;
    }
}

// True when the object that closes at `close` has no members.
bool object_is_empty(std::string_view line, std::size_t close) {
    std::size_t i = close;
    while (i > 0 && is_space(line[i - 1]))
        --i;
    return i > 0 && line[i - 1] == '{';
}

} // namespace

AnnotationSplice splice_point(std::string_view line, bool has_idem_member) {
    AnnotationSplice splice;
    std::size_t close = std::string_view::npos;
    if (has_idem_member) close = find_idem_close(line);
    if (close != std::string_view::npos) {
        splice.opening = "";
        splice.closing = "";
    } else {
        // A parsed object ends with '}', perhaps followed by white space.
        close = line.size();
        while (close > 0 && is_space(line[close - 1]))
            --close;
        assert(close > 0 && line[close - 1] == '}' && "splice_point needs a parsed JSON object");
        --close;
        splice.opening = "\"_idem\":{";
        splice.closing = "}";
    }
    splice.before = line.substr(0, close);
    splice.separator = object_is_empty(line, close) ? "" : ",";
    splice.after = line.substr(close);
    return splice;
}

std::string annotate(std::string_view line, bool has_idem_member, std::string_view member) {
    auto splice = splice_point(line, has_idem_member);
    std::string out;
    out.reserve(line.size() + member.size() + 16);
    out.append(splice.before).append(splice.separator).append(splice.opening);
    out.append(member).append(splice.closing).append(splice.after);
    return out;
}

void write_annotated(io::Sink& sink, std::string_view line, bool has_idem_member,
                     std::string_view member) {
    auto splice = splice_point(line, has_idem_member);
    for (auto piece :
         {splice.before, splice.separator, splice.opening, member, splice.closing, splice.after})
        sink.write(piece);
    sink.write("\n");
    sink.count_record();
}

void append_json_string(std::string& out, std::string_view text) {
    detail::write_canonical_string(text, out);
}

} // namespace idem::record
