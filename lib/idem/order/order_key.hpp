#pragma once
// What records are ordered by (`reorder`, `states`; docs/reorder.md):
// sequence numbers, time stamps and hybrid logical clock stamps read from a
// record's fields, and the partition a record belongs to.

#include "idem/order/sequencer_state.hpp"
#include "idem/record/field_path.hpp"
#include "idem/record/parser.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::order {

// The highest sequence number or version idem orders: the one after it
// (what a partition then expects next) must still be a 64-bit integer, so
// a record numbered 2^63-1 is set aside, never wrapped to -2^63.
inline constexpr std::int64_t k_last_sequence = INT64_MAX - 1;

// A JSON integer, or a string of decimal digits, from 0 to k_last_sequence.
[[nodiscard]] std::optional<std::int64_t> parse_sequence(const record::FieldValue& value);

// The sequence number at `path` in the record `parser` holds, as
// parse_sequence(find(path)) reads it. A JSON integer is read as the number
// it is; for anything else `found` is set to what find() gave (nullopt when
// the field is missing), to say what was wrong.
[[nodiscard]] std::optional<std::int64_t> find_sequence(record::RecordParser& parser,
                                                        const record::FieldPath& path,
                                                        std::optional<record::FieldValue>& found);

// An RFC 3339 time or epoch number ({microseconds, 0}), or a hybrid logical
// clock stamp "<physical>.<logical>" whose physical part has 12 or more
// digits (epoch milliseconds or finer): {its microseconds, logical}.
[[nodiscard]] std::optional<order::OrderKey> parse_stamp(const record::FieldValue& value);

// The partition key: the values at `paths`, encoded unambiguously (idem-key/1
// values, docs/dedup.md) into `out`. Returns the first missing path, if any.
[[nodiscard]] const record::FieldPath* encode_partition(record::RecordParser& parser,
                                                        const std::vector<record::FieldPath>& paths,
                                                        std::string& out);

// The partition's values as JSON, for gap records and messages: the value
// for one path, an array for several, null for none.
[[nodiscard]] std::string partition_label(std::string_view encoded, std::size_t paths);

} // namespace idem::order
