#pragma once
// Time zones for calendar buckets (`dedup --bucket day --tz Asia/Shanghai`):
// UTC, fixed offsets, and IANA zones read from the system's TZif files.

#include "idem/util/time.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem {

class TimeZone {
public:
    static TimeZone utc();
    static TimeZone fixed(std::chrono::seconds offset);
    // Parses TZif data (RFC 8536, version 2 or later). nullopt when malformed.
    static std::optional<TimeZone> from_tzif(std::string_view data, std::string name);
    // "UTC", "+08:00" / "-05:30", or an IANA name such as Asia/Shanghai,
    // read from /usr/share/zoneinfo. Throws UsageError naming it.
    static TimeZone load(std::string_view name);

    // The zone's offset from UTC at `at`. After the last transition in the
    // file (2037 in the system's files) the last offset holds.
    [[nodiscard]] std::chrono::seconds offset_at(Timestamp at) const;
    [[nodiscard]] const std::string& name() const { return m_name; }

private:
    std::string m_name;
    std::int32_t m_initial_offset = 0;
    std::vector<std::int64_t> m_transitions; // seconds since the epoch, ascending
    std::vector<std::int32_t> m_offsets;     // the offset from each transition on
};

enum class BucketSize { day, hour };

// "2026-11-30" or "2026-11-30T08": the local calendar bucket of `at`.
[[nodiscard]] std::string calendar_bucket(Timestamp at, const TimeZone& zone, BucketSize size);

} // namespace idem
