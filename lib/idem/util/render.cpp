#include "idem/util/render.hpp"

#include "idem/util/text.hpp"

#include <charconv>
#include <cstdint>
#include <cstring>
#include <fmt/format.h>
#include <utf8proc.h>

namespace idem {

namespace {

// `value` through terminal_text, then each character `escape` appends in a
// form of its own (returning true) escaped; the others as they are.
template <typename Escape> std::string escaped(std::string_view value, Escape escape) {
    auto text = terminal_text(value);
    std::string out;
    out.reserve(text.size() + text.size() / 8);
    for (char c : text)
        if (!escape(out, c)) out += c;
    return out;
}

// & < > " ' as HTML's entities (& < > in Markdown too, where a viewer
// renders raw HTML).
bool append_html_entity(std::string& out, char c, bool quotes) {
    switch (c) {
    case '&':
        out += "&amp;";
        return true;
    case '<':
        out += "&lt;";
        return true;
    case '>':
        out += "&gt;";
        return true;
    case '"':
        if (!quotes) return false;
        out += "&quot;";
        return true;
    case '\'':
        if (!quotes) return false;
        out += "&#39;";
        return true;
    default:
        return false;
    }
}

} // namespace

std::string markdown_text(std::string_view value) {
    constexpr std::string_view k_inline_syntax = "\\`*_[]|~";
    return escaped(value, [&](std::string& out, char c) {
        if (append_html_entity(out, c, false)) return true;
        if (k_inline_syntax.find(c) == std::string_view::npos) return false;
        out += '\\';
        out += c;
        return true;
    });
}

std::string text_report_value(std::string_view value, bool markdown) {
    return markdown ? markdown_text(value) : terminal_text(value);
}

std::string html_escape(std::string_view value) {
    return escaped(value,
                   [](std::string& out, char c) { return append_html_entity(out, c, true); });
}

std::string xml_text(std::string_view value) {
    return html_escape(value);
}

std::string dot_quoted(std::string_view value) {
    return '"' +
           escaped(value,
                   [](std::string& out, char c) {
                       if (c != '"' && c != '\\') return false;
                       out += '\\';
                       out += c;
                       return true;
                   }) +
           '"';
}

std::string mermaid_label(std::string_view value) {
    return escaped(value, [](std::string& out, char c) {
        std::string_view code;
        switch (c) {
        case '#':
            code = "#35;";
            break;
        case ';':
            code = "#59;";
            break;
        case '"':
            code = "#quot;";
            break;
        case '&':
            code = "#amp;";
            break;
        case '<':
            code = "#lt;";
            break;
        case '>':
            code = "#gt;";
            break;
        default:
            return false;
        }
        out += code;
        return true;
    });
}

namespace {

bool is_hidden_format_character(utf8proc_int32_t c) {
    return c == 0x061c || (c >= 0x200b && c <= 0x200f) || (c >= 0x202a && c <= 0x202e) ||
           (c >= 0x2066 && c <= 0x2069) || c == 0xfeff || c == 0x2028 || c == 0x2029 ||
           c == 0xfffe || c == 0xffff;
}

} // namespace

bool is_json_report_text(std::string_view json) {
    // Eight bytes a step: a byte is 0x7f or more exactly when it, or it plus
    // one, has its top bit set (a carry out of a byte comes only from one of
    // 0x80 or more, which the first test already flags).
    constexpr std::uint64_t k_ones = 0x0101010101010101ULL;
    constexpr std::uint64_t k_tops = 0x8080808080808080ULL;
    std::uint64_t beyond = 0;
    std::size_t at = 0;
    for (; at + sizeof beyond <= json.size(); at += sizeof beyond) {
        std::uint64_t word = 0;
        std::memcpy(&word, json.data() + at, sizeof word);
        beyond |= word | (word + k_ones);
    }
    for (; at < json.size(); ++at)
        if (static_cast<unsigned char>(json[at]) >= 0x7f) return false;
    return (beyond & k_tops) == 0;
}

std::string json_report_text(std::string_view json) {
    std::string out;
    out.reserve(json.size());
    while (!json.empty()) {
        auto first = static_cast<unsigned char>(json.front());
        if (first < 0x80 && first != 0x7f) {
            // ASCII runs are copied whole.
            std::size_t run = 1;
            while (run < json.size() && static_cast<unsigned char>(json[run]) < 0x80 &&
                   json[run] != 0x7f)
                ++run;
            out.append(json.substr(0, run));
            json.remove_prefix(run);
            continue;
        }
        utf8proc_int32_t c = 0;
        auto length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(json.data()),
                                       static_cast<utf8proc_ssize_t>(json.size()), &c);
        if (length <= 0) { // not UTF-8: kept for the parser to judge
            out += json.front();
            json.remove_prefix(1);
            continue;
        }
        if (c == 0x7f || (c >= 0x80 && c <= 0x9f) || is_hidden_format_character(c))
            out += fmt::format("\\u{:04x}", c);
        else
            out.append(json.substr(0, static_cast<std::size_t>(length)));
        json.remove_prefix(static_cast<std::size_t>(length));
    }
    return out;
}

std::string yaml_quoted(std::string_view value) {
    std::string out = "\"";
    out.reserve(value.size() + 2);
    while (!value.empty()) {
        utf8proc_int32_t c = 0;
        auto length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(value.data()),
                                       static_cast<utf8proc_ssize_t>(value.size()), &c);
        if (length <= 0) {
            out += fmt::format("\\x{:02x}", static_cast<unsigned char>(value.front()));
            value.remove_prefix(1);
            continue;
        }
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (c < 0x20 || (c >= 0x7f && c <= 0x9f)) {
            out += fmt::format("\\x{:02x}", c);
        } else if (is_hidden_format_character(c)) {
            out += fmt::format("\\u{:04x}", c);
        } else {
            out.append(value.substr(0, static_cast<std::size_t>(length)));
        }
        value.remove_prefix(static_cast<std::size_t>(length));
    }
    out += '"';
    return out;
}

namespace {

// The next character of `text`: its length in bytes and its width in
// columns. An invalid byte is one byte and one column (terminal_text has
// already made such bytes visible as \xNN in every report line).
struct Character {
    std::size_t bytes;
    std::size_t columns;
};

Character next_character(std::string_view text) {
    utf8proc_int32_t code_point = 0;
    auto length = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                   static_cast<utf8proc_ssize_t>(text.size()), &code_point);
    if (length <= 0) return {1, 1};
    auto width = utf8proc_charwidth(code_point);
    return {static_cast<std::size_t>(length), width < 0 ? 0 : static_cast<std::size_t>(width)};
}

} // namespace

std::size_t display_width(std::string_view text) {
    std::size_t columns = 0;
    while (!text.empty()) {
        auto character = next_character(text);
        columns += character.columns;
        text.remove_prefix(character.bytes);
    }
    return columns;
}

std::string fit_line(std::string_view line, std::size_t width) {
    constexpr std::string_view ellipsis = "...";
    if (width == k_never_cut || display_width(line) <= width) return std::string(line);
    auto room = width > ellipsis.size() ? width - ellipsis.size() : 0;
    std::size_t columns = 0, bytes = 0;
    while (bytes < line.size()) {
        auto character = next_character(line.substr(bytes));
        if (columns + character.columns > room) break;
        columns += character.columns;
        bytes += character.bytes;
    }
    std::string out(line.substr(0, bytes));
    out += ellipsis.substr(0, std::min(ellipsis.size(), width));
    return out;
}

std::size_t table_width(const ReaderWidth& reader) {
    if (reader.wide || !reader.to_terminal) return k_never_cut;
    std::size_t columns = 0;
    auto text = reader.columns_variable;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), columns);
    if (!text.empty() && error == std::errc() && end == text.data() + text.size() && columns > 0)
        return columns;
    return reader.terminal_columns > 0 ? reader.terminal_columns : 80;
}

std::string fit_lines(std::string_view text, std::size_t width) {
    if (width == k_never_cut) return std::string(text);
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        auto end = text.find('\n');
        auto line = text.substr(0, end);
        out += fit_line(line, width);
        if (end == std::string_view::npos) break;
        out += '\n';
        text.remove_prefix(end + 1);
    }
    return out;
}

} // namespace idem
