#pragma once
// The text media reports are written in, one function per medium. Every
// value from a log, a delivery or a user passes through the medium's
// function before it joins a report: terminal_text (util/text.hpp) for
// table reports, markdown_text for Markdown; html_escape for HTML, and
// states' own label quoting for Mermaid and DOT. Table lines are then cut
// to the reader's width by display width (fit_line).

#include <cstddef>
#include <string>
#include <string_view>

namespace idem {

// A value for a Markdown cell, heading or list item: terminal_text first
// (no control, C1 or bidi character, no line break, so a value never
// starts a row or a heading of its own), then & < > as HTML entities (no
// raw HTML reaches a viewer) and the characters Markdown gives a meaning
// to inline (\ ` * _ [ ] | ~) escaped with a backslash, so a value never
// closes a cell, opens a code span or makes a link.
[[nodiscard]] std::string markdown_text(std::string_view value);

// A JSON report (a document nlohmann or a renderer wrote: every control
// byte in its strings already escaped) with DEL, C1 controls, the line
// separators U+2028/U+2029 and the bidi and invisible formatting
// characters escaped as \uXXXX too: the same JSON to a parser, and nothing
// that drives or reorders a terminal when a person reads it there. Outside
// strings JSON is ASCII, so only string contents change.
[[nodiscard]] std::string json_report_text(std::string_view json);
// Whether json_report_text() leaves `json` as it is: ASCII without DEL. A
// report's text nearly always is, and is then written without a copy.
[[nodiscard]] bool is_json_report_text(std::string_view json);

// A value as a double-quoted YAML scalar (YAML 1.2, 7.3.1), which reads
// back as exactly `value`: " and \ escaped, C0, DEL and C1 as \xNN (\n,
// \t, \r by name), the line separators U+2028/U+2029, the bidi and
// invisible formatting characters and U+FFFE/U+FFFF as \uXXXX, a byte that
// is not UTF-8 as \xNN; other UTF-8 as it is. (yaml-cpp's emitter writes
// DEL and bidi controls raw, and with EscapeNonAscii every accented letter
// as an escape.)
[[nodiscard]] std::string yaml_quoted(std::string_view value);

// A value for a report written either as a table or as Markdown (states'
// and reconcile's render_text): markdown_text, or terminal_text.
[[nodiscard]] std::string text_report_value(std::string_view value, bool markdown);

// A DOT string (Graphviz): terminal_text first (a newline in a name never
// reaches the file), then " and \ escaped, inside double quotes.
[[nodiscard]] std::string dot_quoted(std::string_view value);

// A Mermaid label, which runs to the end of its line: terminal_text first
// (no newline starts a statement of its own), then # ; " & < > as
// Mermaid's entity codes (#35; #59; #quot; #amp; #lt; #gt;): ; and "
// would end or break the statement, and < > & make HTML where Mermaid
// renders labels as HTML.
[[nodiscard]] std::string mermaid_label(std::string_view value);

// Text for HTML, in an element or an attribute: terminal_text first (a
// bidi override or a C1 control reorders or hides text in a browser too,
// and shows as \u{XXXX}), then & < > " ' escaped.
[[nodiscard]] std::string html_escape(std::string_view value);

// Text for XML 1.0 (probe's JUnit report), in an element or an attribute:
// terminal_text first (XML 1.0 forbids the C0 controls it replaces; no
// bidi override reorders a CI page), then & < > " ' as entities, as
// html_escape writes them, which XML reads alike.
[[nodiscard]] std::string xml_text(std::string_view value);

// How many terminal columns `text` takes: East Asian wide characters two,
// combining marks none (utf8proc's widths); an invalid byte one.
[[nodiscard]] std::size_t display_width(std::string_view text);

// `line` cut to `width` display columns on a character boundary, the last
// three columns "..." when anything was cut; the line as it is when it
// fits or when `width` is k_never_cut.
inline constexpr std::size_t k_never_cut = 0;
[[nodiscard]] std::string fit_line(std::string_view line, std::size_t width);

// The width table reports are cut to. Only a terminal is a reader with a
// width: into a file or a pipe, and with --wide, nothing is cut. On a
// terminal, COLUMNS when it holds a number (the user's own setting, as ls
// reads it), else the terminal's own width (TIOCGWINSZ), else 80.
struct ReaderWidth {
    bool wide = false;                 // --wide: never cut
    bool to_terminal = false;          // the report goes to a terminal
    std::string_view columns_variable; // COLUMNS, "" when unset
    std::size_t terminal_columns = 0;  // TIOCGWINSZ's ws_col, 0 when unknown
};
[[nodiscard]] std::size_t table_width(const ReaderWidth& reader);

// Every line of `text` fitted to `width` (fit_line), newlines kept.
[[nodiscard]] std::string fit_lines(std::string_view text, std::size_t width);

} // namespace idem
