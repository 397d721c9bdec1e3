#include "idem/util/text.hpp"

#include "idem/util/errors.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>
#include <fmt/format.h>
#include <utf8proc.h>

namespace idem {

std::string quote(std::string_view value, std::size_t max_chars) {
    std::string out = "'";
    std::size_t shown = 0;
    for (char c : value) {
        if (shown == max_chars) {
            out += "...";
            break;
        }
        auto byte = static_cast<unsigned char>(c);
        if (byte == '\'' || byte == '\\') {
            out += '\\';
            out += c;
        } else if (byte < 0x20 || byte >= 0x7f) {
            out += fmt::format("\\x{:02x}", byte);
        } else {
            out += c;
        }
        ++shown;
    }
    out += '\'';
    return out;
}

std::size_t utf8_cut(std::string_view text, std::size_t max_bytes) {
    if (text.size() <= max_bytes) return text.size();
    auto cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
        --cut; // text[cut] continues a sequence that starts before it
    return cut;
}

std::string utf8_prefix(std::string_view text, std::size_t max_bytes) {
    return std::string(text.substr(0, utf8_cut(text, max_bytes)));
}

std::size_t utf8_sequence_length(std::string_view text) {
    if (text.empty()) return 0;
    auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
    auto lead = byte(0);
    if (lead < 0x80) return 1;
    std::size_t length = 0;
    unsigned char low = 0x80;
    unsigned char high = 0xbf;
    if (lead >= 0xc2 && lead <= 0xdf) {
        length = 2;
    } else if (lead >= 0xe0 && lead <= 0xef) {
        length = 3;
        if (lead == 0xe0) low = 0xa0;  // no overlong forms
        if (lead == 0xed) high = 0x9f; // no surrogates
    } else if (lead >= 0xf0 && lead <= 0xf4) {
        length = 4;
        if (lead == 0xf0) low = 0x90;
        if (lead == 0xf4) high = 0x8f; // nothing past U+10FFFF
    } else {
        return 0;
    }
    if (text.size() < length) return 0;
    if (byte(1) < low || byte(1) > high) return 0;
    for (std::size_t i = 2; i < length; ++i)
        if (byte(i) < 0x80 || byte(i) > 0xbf) return 0;
    return length;
}

namespace {

// The code point of a valid UTF-8 sequence of `length` bytes.
char32_t code_point_of(std::string_view sequence, std::size_t length) {
    auto byte = [&](std::size_t i) {
        return static_cast<char32_t>(static_cast<unsigned char>(sequence[i]));
    };
    if (length == 2) return ((byte(0) & 0x1f) << 6) | (byte(1) & 0x3f);
    if (length == 3) return ((byte(0) & 0x0f) << 12) | ((byte(1) & 0x3f) << 6) | (byte(2) & 0x3f);
    return ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3f) << 12) | ((byte(2) & 0x3f) << 6) |
           (byte(3) & 0x3f);
}

// C1 controls, and characters that reorder or hide text on a terminal.
bool is_hidden_control(char32_t c) {
    return (c >= 0x80 && c <= 0x9f) || c == 0x061c || (c >= 0x200b && c <= 0x200f) ||
           (c >= 0x202a && c <= 0x202e) || (c >= 0x2066 && c <= 0x2069) || c == 0xfeff;
}

enum class KeepLineBreaks { yes, no };

std::string escape_controls(std::string_view text, KeepLineBreaks keep) {
    std::string out;
    out.reserve(text.size());
    while (!text.empty()) {
        auto first = static_cast<unsigned char>(text.front());
        auto length = utf8_sequence_length(text);
        if (length > 1) {
            auto c = code_point_of(text, length);
            if (is_hidden_control(c))
                out += fmt::format("\\u{{{:04X}}}", static_cast<std::uint32_t>(c));
            else
                out.append(text.substr(0, length));
            text.remove_prefix(length);
            continue;
        }
        bool kept_break = keep == KeepLineBreaks::yes && (first == '\n' || first == '\t');
        if (kept_break || (length == 1 && first >= 0x20 && first != 0x7f))
            out += static_cast<char>(first);
        else
            out += fmt::format("\\x{:02x}", first);
        text.remove_prefix(1);
    }
    return out;
}

} // namespace

std::string escape_for_terminal(std::string_view text) {
    return escape_controls(text, KeepLineBreaks::yes);
}

std::string terminal_text(std::string_view text) {
    return escape_controls(text, KeepLineBreaks::no);
}

namespace {
// ASCII only: header names are ASCII, and the C locale's tolower is a
// function call per byte on the per-record path.
constexpr char ascii_lower(char c) {
    return c >= 'A' && c <= 'Z' ? static_cast<char>(c + ('a' - 'A')) : c;
}
} // namespace

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    return true;
}

std::string to_lower(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

std::string_view trim(std::string_view text) {
    auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
    while (!text.empty() && is_space(text.front()))
        text.remove_prefix(1);
    while (!text.empty() && is_space(text.back()))
        text.remove_suffix(1);
    return text;
}

void append_offline_html_head(std::string& out, std::string_view title, std::string_view style,
                              std::string_view script_hash) {
    out += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
           "style-src 'unsafe-inline'; script-src '";
    out += script_hash;
    out += "'\"><title>";
    out += title;
    out += "</title><style>";
    out += style;
    out += "</style></head><body><h1>";
    out += title;
    out += "</h1>";
}

std::vector<std::string_view> split(std::string_view text, char separator) {
    std::vector<std::string_view> pieces;
    std::size_t start = 0;
    while (true) {
        auto end = text.find(separator, start);
        if (end == std::string_view::npos) {
            pieces.push_back(text.substr(start));
            return pieces;
        }
        pieces.push_back(text.substr(start, end - start));
        start = end + 1;
    }
}

namespace {
std::size_t edit_distance(std::string_view a, std::string_view b) {
    std::vector<std::size_t> row(b.size() + 1);
    for (std::size_t j = 0; j <= b.size(); ++j)
        row[j] = j;
    for (std::size_t i = 1; i <= a.size(); ++i) {
        std::size_t diagonal = row[0];
        row[0] = i;
        for (std::size_t j = 1; j <= b.size(); ++j) {
            std::size_t above = row[j];
            std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + cost});
            diagonal = above;
        }
    }
    return row[b.size()];
}
} // namespace

std::string closest_name(std::string_view unknown, const std::vector<std::string>& known) {
    std::string best;
    std::size_t best_distance = std::max<std::size_t>(2, unknown.size() / 3) + 1;
    for (const auto& name : known) {
        auto distance = edit_distance(to_lower(unknown), to_lower(name));
        if (distance < best_distance) {
            best_distance = distance;
            best = name;
        }
    }
    return best;
}

std::string format_bytes(std::uint64_t bytes) {
    constexpr std::uint64_t k_kib = 1024;
    if (bytes >= k_kib * k_kib * k_kib && bytes % (k_kib * k_kib * k_kib) == 0)
        return fmt::format("{} GiB", bytes / (k_kib * k_kib * k_kib));
    if (bytes >= k_kib * k_kib && bytes % (k_kib * k_kib) == 0)
        return fmt::format("{} MiB", bytes / (k_kib * k_kib));
    if (bytes >= k_kib * k_kib)
        return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (k_kib * k_kib));
    if (bytes >= k_kib) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / k_kib);
    return fmt::format("{} B", bytes);
}

std::uint64_t parse_byte_size(std::string_view text) {
    std::uint64_t number = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error != std::errc{} || end == text.data())
        throw UsageError(
            fmt::format("invalid size {}: expected a number such as 16MiB", quote(text)));
    std::string unit = to_lower(
        trim(std::string_view(end, static_cast<std::size_t>(text.data() + text.size() - end))));
    std::uint64_t multiplier = 0;
    if (unit.empty() || unit == "b")
        multiplier = 1;
    else if (unit == "k" || unit == "kb" || unit == "kib")
        multiplier = 1024;
    else if (unit == "m" || unit == "mb" || unit == "mib")
        multiplier = 1024ULL * 1024;
    else if (unit == "g" || unit == "gb" || unit == "gib")
        multiplier = 1024ULL * 1024 * 1024;
    else
        throw UsageError(fmt::format("invalid size {}: unknown unit {} (use B, KiB, MiB or GiB)",
                                     quote(text), quote(unit)));
    if (number > UINT64_MAX / multiplier)
        throw UsageError(fmt::format("size {} is too large", quote(text)));
    return number * multiplier;
}

std::optional<std::string> nfkd(std::string_view utf8) {
    utf8proc_uint8_t* mapped = nullptr;
    auto size = utf8proc_map(
        reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
        static_cast<utf8proc_ssize_t>(utf8.size()), &mapped,
        static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPAT | UTF8PROC_DECOMPOSE));
    if (size < 0) return std::nullopt;
    std::string normalized(reinterpret_cast<const char*>(mapped), static_cast<std::size_t>(size));
    explicit_bzero(mapped, static_cast<std::size_t>(size));
    std::free(mapped);
    return normalized;
}

} // namespace idem
