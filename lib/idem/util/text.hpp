#pragma once
// Small text helpers shared by messages and parsers.

#include <charconv>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem {

// Quotes a user value for a message: 'value', with control bytes, quotes and
// non-ASCII bytes escaped so that nothing a user typed can corrupt a terminal.
// Long values are cut at max_chars with an ellipsis.
[[nodiscard]] std::string quote(std::string_view value, std::size_t max_chars = 120);

// A message made safe for a terminal: control bytes (but the message's own
// newlines and tabs), DEL and bytes that are not valid UTF-8 become \xNN,
// C1 controls and the bidi and invisible formatting characters \u{XXXX}
// (see terminal_text); other UTF-8 is kept. For text that may hold input
// or user values (an exception's message) on its way to stderr.
[[nodiscard]] std::string escape_for_terminal(std::string_view text);

// A value from a log made safe as part of one line of a text report (the
// terminal medium): every byte below 0x20 (newline, CR and tab too, so a
// value never starts a line of its own), DEL and bytes that are not UTF-8
// become \xNN; C1 controls (U+0080-U+009F: U+009B is a one-byte CSI) and
// the bidi and invisible formatting characters (U+061C, U+200B-U+200F,
// U+202A-U+202E, U+2066-U+2069, U+FEFF) become \u{XXXX}. Every text
// report line that holds a value passes through it.
[[nodiscard]] std::string terminal_text(std::string_view text);

// The length of the valid UTF-8 sequence at the start of `text`, or 0 when
// it does not start with one.
[[nodiscard]] std::size_t utf8_sequence_length(std::string_view text);

// How many of `text`'s first `max_bytes` to keep so that no UTF-8
// sequence is cut in two (a cut one is dropped whole).
[[nodiscard]] std::size_t utf8_cut(std::string_view text, std::size_t max_bytes);
// At most `max_bytes` of `text`, cut there: a bounded excerpt of what a
// peer sent.
[[nodiscard]] std::string utf8_prefix(std::string_view text, std::size_t max_bytes);

[[nodiscard]] bool iequals(std::string_view a, std::string_view b);
[[nodiscard]] std::string to_lower(std::string_view text);

// Unicode compatibility decomposition (NFKD, by Debian's utf8proc) of UTF-8
// text; nullopt when the text is not valid UTF-8. Meant for secrets: the
// library's working copy is wiped before it is freed.
[[nodiscard]] std::optional<std::string> nfkd(std::string_view utf8);
[[nodiscard]] std::string_view trim(std::string_view text);

// The script states' and reconcile's pages end with: marks the page ready
// and counts what it loaded (tests read both from the rendered DOM).
inline constexpr std::string_view k_ready_script =
    "document.documentElement.dataset.ready='1';document.documentElement.dataset.resources="
    "String(performance.getEntriesByType('resource').length);";

// The start of a report page that loads nothing from anywhere (audit,
// states, reconcile), up to its <h1>: a Content-Security-Policy that allows
// the page's own inline style and only the one script whose hash is
// `script_hash` ("sha256-<base64>", crypto::csp_hash), so a script a
// value smuggled in never runs even if escaping failed; `title` as the
// title and heading, `style` as its CSS.
void append_offline_html_head(std::string& out, std::string_view title, std::string_view style,
                              std::string_view script_hash);

// An integer in decimal, appended in place: for text written per record,
// where fmt::format would make a string each time.
template <std::integral Integer> void append_decimal(std::string& out, Integer value) {
    char digits[24];
    auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
    out.append(digits, end);
}

// Splits on a single-character separator; empty pieces are kept.
[[nodiscard]] std::vector<std::string_view> split(std::string_view text, char separator);

// The closest name to `unknown` among `known`, for "did you mean" hints;
// empty when nothing is close.
[[nodiscard]] std::string closest_name(std::string_view unknown,
                                       const std::vector<std::string>& known);

// "1.2 MiB", "16 MiB", "512 B".
[[nodiscard]] std::string format_bytes(std::uint64_t bytes);

// Parses sizes such as "16MiB", "20M", "4096", "1G" (binary multiples).
[[nodiscard]] std::uint64_t parse_byte_size(std::string_view text);

} // namespace idem
