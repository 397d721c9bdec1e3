#pragma once
// Durations ("300ms", "5m", "1h30m", "7d") and timestamps (RFC 3339 with any
// offset, or epoch seconds / milliseconds / microseconds / nanoseconds told
// apart by magnitude). Everything is UTC microseconds inside.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem {

using Duration = std::chrono::microseconds;
using Timestamp = std::chrono::sys_time<std::chrono::microseconds>;

// Throws UsageError naming the text when it is not a duration.
[[nodiscard]] Duration parse_duration(std::string_view text);

// std::nullopt when the text is not a timestamp.
[[nodiscard]] std::optional<Timestamp> parse_timestamp(std::string_view text);

// Whether `text` is a date and time without a UTC offset (SQL's
// "2026-11-30 09:00:00"): parse_timestamp reads it as UTC, and a command
// given --tz reads it in that zone instead.
[[nodiscard]] bool lacks_utc_offset(std::string_view text);

// Epoch number (integer or decimal) in the unit its magnitude suggests:
// below 1e11 seconds, below 1e14 milliseconds, below 1e17 microseconds,
// else nanoseconds.
[[nodiscard]] Timestamp timestamp_from_epoch_number(double value);

// Like parse_timestamp, but throws UsageError naming the flag.
[[nodiscard]] Timestamp parse_timestamp_flag(std::string_view flag, std::string_view text);

// "2026-11-30T00:02:05.123Z" (millisecond precision).
[[nodiscard]] std::string format_rfc3339(Timestamp at);
// The same, appended: for reports that write one per record.
void append_rfc3339(std::string& out, Timestamp at);

// IMF-fixdate, "Sun, 06 Nov 1994 08:49:37 GMT": the HTTP date RFC 9110
// says to send (Retry-After, Date). The obsolete forms are not accepted.
[[nodiscard]] std::optional<Timestamp> parse_http_date(std::string_view text);
[[nodiscard]] std::string format_http_date(Timestamp at);

// "5m", "1h30m", "300ms", "2d3h": the shortest exact spelling.
[[nodiscard]] std::string format_duration(Duration duration);

// The clocks every "now" of the library reads: the system clock (times that
// are written down: TTLs, leases, a store's expiry) and the steady clock
// (intervals inside a run: a server's deadlines), both shifted by one
// offset. A shifted clock still runs, so what a TTL or a deadline sees moves
// as it would; tests move it instead of sleeping (the CLI sets it from
// IDEM_NOW, docs/architecture.md "Time").
[[nodiscard]] Timestamp now_utc();
[[nodiscard]] std::chrono::steady_clock::time_point steady_now();
void set_clock_offset(Duration offset);
// "+2s", "-1h", or an instant (RFC 3339 or epoch seconds) from which the
// clock runs on. Throws UsageError.
[[nodiscard]] Duration parse_clock_offset(std::string_view text);
// The offset is the text of the file at `path` (parse_clock_offset's forms),
// read again each time the file changes, so a test moves the clock of a
// process that is running. An empty path stops reading it (the offset stays).
void set_clock_file(std::string path);

// A duration people would write, at least `at_least`: 1s, 5s, 10s, 30s, 1m,
// 2m, 5m, 10m, 15m, 30m, 1h, 2h, 6h, 12h, 24h, 48h, 72h, 7d, then whole days.
[[nodiscard]] Duration round_up_to_written_duration(Duration at_least);

// For `audit --suggest` and `reorder --suggest`: the durations, rounded up
// to ones people write, that cover 99%, 99.9% and all of `delays`
// (microseconds, in any order; empty gives none).
struct Covering {
    double coverage = 0; // 0.99, 0.999, 1
    Duration duration{0};
};
[[nodiscard]] std::vector<Covering> covering_durations(std::vector<std::int64_t> delays);

} // namespace idem
