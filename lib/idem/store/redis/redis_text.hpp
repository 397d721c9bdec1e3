#pragma once
// Internal to the Redis store: reading the numbers its values begin with
// (verdicts, first copies).

#include <charconv>
#include <string_view>

namespace idem::store::detail {

// Reads a number and the one separator after it from the front of `text`.
template <typename Number>
bool read_number(std::string_view& text, Number& number, char separator) {
    auto [next, error] = std::from_chars(text.data(), text.data() + text.size(), number);
    if (error != std::errc{} || next == text.data() + text.size() || *next != separator)
        return false;
    text.remove_prefix(static_cast<std::size_t>(next - text.data()) + 1);
    return true;
}

} // namespace idem::store::detail
