// Zones from cctz; the names, offsets and buckets idem accepts.

#include "idem/util/time_zone.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <cctz/time_zone.h>
#include <fmt/format.h>

namespace idem {

struct TimeZone::Rules {
    cctz::time_zone zone;
};

TimeZone::TimeZone(std::string name, std::shared_ptr<const Rules> rules)
    : m_name(std::move(name)), m_rules(std::move(rules)) {}

TimeZone TimeZone::utc() {
    return TimeZone("UTC", std::make_shared<const Rules>(Rules{cctz::utc_time_zone()}));
}

TimeZone TimeZone::fixed(std::chrono::seconds offset) {
    auto total = offset.count();
    auto sign = total < 0 ? '-' : '+';
    auto magnitude = total < 0 ? -total : total;
    return TimeZone(fmt::format("{}{:02}:{:02}", sign, magnitude / 3600, magnitude % 3600 / 60),
                    std::make_shared<const Rules>(Rules{cctz::fixed_time_zone(offset)}));
}

TimeZone TimeZone::load(std::string_view name) {
    if (name == "UTC" || name == "Z" || name == "utc") return utc();
    if (!name.empty() && (name.front() == '+' || name.front() == '-')) {
        if (auto parsed = parse_timestamp(fmt::format("1970-01-01T00:00:00{}", name))) {
            auto offset =
                -std::chrono::duration_cast<std::chrono::seconds>(parsed->time_since_epoch());
            return fixed(offset);
        }
        throw UsageError(
            fmt::format("invalid time zone offset {}: expected +08:00 or -05:30", quote(name)));
    }
    auto unknown = [&] {
        return UsageError(
            fmt::format("unknown time zone {}: use an IANA name such as Asia/Shanghai, UTC, or "
                        "an offset such as +08:00",
                        quote(name)));
    };
    // A zone name is a path below the zone directory, never above it.
    if (name.empty() || name.front() == '/' || name.find("..") != std::string_view::npos)
        throw unknown();
    Rules rules;
    // cctz answers false (and UTC) for a name it has no file for.
    if (!cctz::load_time_zone(std::string(name), &rules.zone)) throw unknown();
    return TimeZone(std::string(name), std::make_shared<const Rules>(rules));
}

std::chrono::seconds TimeZone::offset_at(Timestamp at) const {
    auto seconds = std::chrono::time_point_cast<std::chrono::seconds>(at);
    return std::chrono::seconds(m_rules->zone.lookup(seconds).offset);
}

Timestamp TimeZone::from_local(Timestamp wall) const {
    using namespace std::chrono;
    auto whole = floor<seconds>(wall);
    auto civil = cctz::convert(whole, cctz::utc_time_zone());
    auto at = cctz::convert(civil, m_rules->zone);
    return time_point_cast<microseconds>(at) + (wall - whole);
}

std::string calendar_bucket(Timestamp at, const TimeZone& zone, BucketSize size) {
    using namespace std::chrono;
    auto local = time_point_cast<seconds>(at) + zone.offset_at(at);
    auto day = floor<days>(local);
    year_month_day date{day};
    auto text = fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
                            static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
    if (size == BucketSize::hour) text += fmt::format("T{:02}", floor<hours>(local - day).count());
    return text;
}

} // namespace idem
