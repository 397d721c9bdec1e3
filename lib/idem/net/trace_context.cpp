#include "idem/net/trace_context.hpp"

#include "idem/crypto/crypto.hpp"

namespace idem::net {

namespace {

bool lower_hex(std::string_view text) {
    for (char c : text)
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
    return true;
}

bool all_zero(std::string_view text) {
    return text.find_first_not_of('0') == std::string_view::npos;
}

std::string random_hex(std::size_t bytes) {
    unsigned char buffer[16] = {};
    std::string hex;
    do {
        crypto::random_bytes(buffer, bytes);
        static constexpr char k_digits[] = "0123456789abcdef";
        hex.clear();
        for (std::size_t i = 0; i < bytes; ++i) {
            hex += k_digits[buffer[i] >> 4];
            hex += k_digits[buffer[i] & 0xf];
        }
    } while (all_zero(hex));
    return hex;
}

} // namespace

std::optional<TraceParent> parse_traceparent(std::string_view value) {
    // Optional whitespace around a header value is not part of it.
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
        value.remove_prefix(1);
    while (!value.empty() && (value.back() == ' ' || value.back() == '\t'))
        value.remove_suffix(1);
    // version "-" trace-id "-" parent-id "-" flags: 2 + 1 + 32 + 1 + 16 + 1 + 2
    constexpr std::size_t k_length = 55;
    if (value.size() < k_length) return std::nullopt;
    auto version = value.substr(0, 2);
    if (!lower_hex(version) || version == "ff") return std::nullopt;
    // Version 00 is exactly 55 characters; a later version may add fields
    // after a dash, which a version-00 reader ignores.
    if (version == "00" ? value.size() != k_length
                        : value.size() > k_length && value[k_length] != '-')
        return std::nullopt;
    if (value[2] != '-' || value[35] != '-' || value[52] != '-') return std::nullopt;
    TraceParent parent{std::string(value.substr(3, 32)), std::string(value.substr(36, 16)),
                       std::string(value.substr(53, 2))};
    if (!lower_hex(parent.trace_id) || !lower_hex(parent.parent_id) || !lower_hex(parent.flags) ||
        all_zero(parent.trace_id) || all_zero(parent.parent_id))
        return std::nullopt;
    return parent;
}

std::string format_traceparent(std::string_view trace_id, std::string_view span_id,
                               std::string_view flags) {
    std::string out = "00-";
    out += trace_id;
    out += '-';
    out += span_id;
    out += '-';
    out += flags;
    return out;
}

std::string new_trace_id() {
    return random_hex(16);
}

std::string new_span_id() {
    return random_hex(8);
}

} // namespace idem::net
