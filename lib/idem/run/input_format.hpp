#pragma once
// What an input is, told by its first bytes when --input-format is not
// given (docs/records.md, "Input formats"): NDJSON, a JSON array or a page
// of records (`{"data": [...]}`), a HAR export, or CSV with a header row.
// Compressed inputs are told by their decompressed bytes.

#include <cstddef>
#include <string_view>

namespace idem::run {

enum class InputFormat { ndjson, har, csv, json, detect };

// Reads enough of an input to tell it: its first two lines, or all of it
// when shorter, or this much when they are longer.
inline constexpr std::size_t k_detect_bytes = 1 << 20;

// `first`: the input's first bytes, through its second newline where it
// has one within k_detect_bytes. `csv_delimiter` is what a CSV header
// holds. What is none of the others is NDJSON, so that a log whose first
// line was cut by a rotation loses that line (rejected), never the rest.
[[nodiscard]] InputFormat detect_input_format(std::string_view first, char csv_delimiter);

} // namespace idem::run
