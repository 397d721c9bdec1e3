#pragma once
// The event time of a record: one rule for every subcommand
// (docs/records.md, "Event time").
//
// With --time-field PATH it is the value at PATH: an RFC 3339 string, or an
// epoch number (seconds, milliseconds, microseconds or nanoseconds, by its
// magnitude), as a JSON string or number. Without one it is an envelope's
// received_at. A plain event without --time-field has none, which is not a
// failure. A time field that is missing, or holds anything else, is a
// failure with one wording everywhere; each subcommand says in its docs
// what it does with such a record (dedup, reorder and replay's selection
// reject it; audit counts it under its --time-field check).

#include "idem/record/field_path.hpp"
#include "idem/record/parser.hpp"
#include "idem/record/time_window.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace idem::record {

struct EventTime {
    enum class Status {
        found,     // `time` holds it
        none,      // no --time-field and no received_at: the record has no event time
        missing,   // --time-field given, nothing at its path
        malformed, // --time-field given, its value is not a timestamp
    };
    Status status = Status::none;
    std::optional<Timestamp> time;

    [[nodiscard]] bool failed() const {
        return status == Status::missing || status == Status::malformed;
    }
};

// The event time of the record `parser` holds. `time_field` null: no
// --time-field was given.
// `zone` (--tz), when given, is where a time without a UTC offset is read
// (otherwise as UTC).
[[nodiscard]] EventTime event_time(RecordParser& parser, const FieldPath* time_field,
                                   const TimeZone* zone = nullptr);

// Where a record's event time falls in --since/--until. A failed event
// time is each command's own rejection, before this is asked; one with
// none (a plain event without --time-field) cannot be placed.
enum class Placement { inside, outside, untimed };
[[nodiscard]] inline Placement place(const TimeWindow& window, const EventTime& time) {
    if (!window.active()) return Placement::inside;
    if (!time.time) return Placement::untimed;
    return window.contains(*time.time) ? Placement::inside : Placement::outside;
}
// Why an untimed record is rejected under --since/--until.
inline constexpr std::string_view k_untimed_in_window =
    "no event time to place in --since/--until (a plain event needs --time-field)";

// Why a failed event time failed, for the reject file and warnings:
// "missing time field 'ts'", "time field 'ts' is not a timestamp ...".
[[nodiscard]] std::string describe_failure(const EventTime& time, const FieldPath& time_field);

} // namespace idem::record
