#pragma once
// Hex and base64 (standard alphabet; the URL-safe one on decode too), for
// signatures, secrets and non-UTF-8 bodies.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem {

[[nodiscard]] std::string hex_encode(std::string_view bytes);
[[nodiscard]] bool is_hex(std::string_view text);
// Either case; nullopt for odd length or a non-hex character.
[[nodiscard]] std::optional<std::string> hex_decode(std::string_view text);

[[nodiscard]] std::string base64_encode(std::string_view bytes);
// The URL-safe alphabet ('-' and '_'), without padding (RFC 4648 section 5,
// as JWTs and Sanity's signatures write it).
[[nodiscard]] std::string base64url_encode(std::string_view bytes);
// Accepts padded or unpadded input in the standard or URL-safe alphabet;
// nullopt for anything else.
[[nodiscard]] std::optional<std::string> base64_decode(std::string_view text);
// Decodes into `out` (reused by hot paths); false on bad input.
bool base64_decode_into(std::string_view text, std::string& out);

// Allocation-free decoders for short values such as signatures: write at most
// `capacity` bytes to `out` and return how many, or nullopt on bad input or
// when the result would not fit.
[[nodiscard]] std::optional<std::size_t> hex_decode_to(std::string_view text, char* out,
                                                       std::size_t capacity);
[[nodiscard]] std::optional<std::size_t> base64_decode_to(std::string_view text, char* out,
                                                          std::size_t capacity);

// application/x-www-form-urlencoded: '+' is a space, %XX a byte (a '%'
// not followed by two hex digits stays as it is).
[[nodiscard]] std::string form_decode(std::string_view text);

// A form body's (name, value) pairs, decoded, in the order they came;
// empty items ("a=1&&b=2") are skipped, and "a" alone is ("a", "").
[[nodiscard]] std::vector<std::pair<std::string, std::string>> parse_form(std::string_view body);

} // namespace idem
