#pragma once
// Time zones for calendar buckets (`dedup --bucket day --tz Asia/Shanghai`):
// UTC, fixed offsets, and IANA zones from the system's zone files, read by
// cctz (Debian's libcctz), which follows each file's POSIX TZ footer past its
// last listed transition (slim files, dates after 2037) and honours TZDIR.

#include "idem/util/time.hpp"

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

namespace idem {

class TimeZone {
public:
    static TimeZone utc();
    static TimeZone fixed(std::chrono::seconds offset);
    // "UTC", "+08:00" / "-05:30", or an IANA name such as Asia/Shanghai,
    // read from $TZDIR or /usr/share/zoneinfo. Throws UsageError naming it.
    static TimeZone load(std::string_view name);

    // The zone's offset from UTC at `at`, daylight saving included, for any
    // year the zone's rules cover.
    [[nodiscard]] std::chrono::seconds offset_at(Timestamp at) const;
    // The instant a wall-clock time of this zone names, the wall time given
    // as if it were UTC ("2026-11-30 09:00:00" read without an offset). A
    // time a daylight-saving change skips or repeats takes the offset in
    // force before the change.
    [[nodiscard]] Timestamp from_local(Timestamp wall) const;
    [[nodiscard]] const std::string& name() const { return m_name; }

private:
    struct Rules; // the cctz zone, kept out of this header
    TimeZone(std::string name, std::shared_ptr<const Rules> rules);

    std::string m_name;
    std::shared_ptr<const Rules> m_rules;
};

enum class BucketSize { day, hour };

// "2026-11-30" or "2026-11-30T08": the local calendar bucket of `at`.
[[nodiscard]] std::string calendar_bucket(Timestamp at, const TimeZone& zone, BucketSize size);

} // namespace idem
