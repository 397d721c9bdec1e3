#pragma once
// --sorted: a plain file whose records are in event-time order is cut to
// --since/--until by binary search; the lines outside the window are
// counted (each a record outside_range, for the counts to add up), never
// parsed. The order is the user's promise: the lines the search reads are
// checked against it, and a file they show out of order is refused rather
// than cut where its records would be lost.

#include "idem/record/field_path.hpp"
#include "idem/record/time_window.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace idem::run {

// How the search reads a line's event time: the run's own rule
// (record/event_time.hpp), so the cut falls where the run would place it.
struct TimeOrder {
    std::optional<record::FieldPath> time_field;
    std::optional<TimeZone> zone;
};

// The part of a file that the window keeps, and what lies outside it.
struct WindowCut {
    std::uint64_t start = 0;          // byte offset of the first line read
    std::uint64_t end = 0;            // the offset after the last line read
    std::uint64_t lines_before = 0;   // lines before `start`, blank ones too
    std::uint64_t records_before = 0; // ... of them not blank
    std::uint64_t records_after = 0;  // lines from `end` on, not blank

    [[nodiscard]] bool cuts(std::uint64_t size) const { return start > 0 || end < size; }
};

// Reads up to `size` bytes at `offset` into `to`; fewer only at the end.
using ReadAt = std::function<std::size_t(std::uint64_t offset, char* to, std::size_t size)>;

// The cut of a file of `size` bytes in event-time order. Lines without an
// event time are never skipped past where the search can see them: the
// cut falls before them. Throws InputError naming `name` when the lines
// the search reads are out of order.
[[nodiscard]] WindowCut cut_to_window(const ReadAt& read_at, std::uint64_t size,
                                      const std::string& name, const record::TimeWindow& window,
                                      const TimeOrder& order);

// The event time of the file's last line that has one: its newest, when
// the file is in order. Nullopt when no line near the end has one.
[[nodiscard]] std::optional<Timestamp> last_event_time(const ReadAt& read_at, std::uint64_t size,
                                                       const TimeOrder& order);

// A file descriptor read with pread(2); throws InputError naming `name`.
[[nodiscard]] ReadAt read_at_fd(int fd, const std::string& name);

} // namespace idem::run
