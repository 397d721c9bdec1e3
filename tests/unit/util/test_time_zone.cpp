#include "idem/util/errors.hpp"
#include "idem/util/time_zone.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace std::chrono;

namespace {
Timestamp at(std::string_view text) {
    return *parse_timestamp(text);
}
} // namespace

TEST_CASE("IANA zones come from the system's TZif files, daylight saving included") {
    auto new_york = TimeZone::load("America/New_York");
    CHECK(new_york.offset_at(at("2026-07-01T12:00:00Z")) == hours(-4));
    CHECK(new_york.offset_at(at("2026-12-01T12:00:00Z")) == hours(-5));
    // The 2026 spring change: 2026-03-08 07:00 UTC.
    CHECK(new_york.offset_at(at("2026-03-08T06:59:59Z")) == hours(-5));
    CHECK(new_york.offset_at(at("2026-03-08T07:00:00Z")) == hours(-4));
    CHECK(TimeZone::load("Asia/Shanghai").offset_at(at("2026-11-30T00:00:00Z")) == hours(8));
}

TEST_CASE("UTC and fixed offsets need no zone file") {
    CHECK(TimeZone::load("UTC").offset_at(at("2026-11-30T00:00:00Z")) == seconds(0));
    CHECK(TimeZone::load("+05:30").offset_at(at("2026-11-30T00:00:00Z")) == minutes(330));
    CHECK(TimeZone::load("-08:00").offset_at(at("2026-11-30T00:00:00Z")) == hours(-8));
    CHECK(TimeZone::load("+05:30").name() == "+05:30");
}

TEST_CASE("an unknown zone is a usage error that names it") {
    CHECK_THROWS_WITH_AS(
        (void)TimeZone::load("Mars/Olympus"),
        "unknown time zone 'Mars/Olympus': use an IANA name such as Asia/Shanghai, UTC, or an "
        "offset such as +08:00",
        UsageError);
    CHECK_THROWS_AS((void)TimeZone::load("../../etc/passwd"), UsageError);
    CHECK_FALSE(TimeZone::from_tzif("not a zone file", "x"));
}

TEST_CASE("calendar buckets follow the zone's local date and hour") {
    auto shanghai = TimeZone::load("Asia/Shanghai");
    CHECK(calendar_bucket(at("2026-11-30T15:59:59Z"), shanghai, BucketSize::day) == "2026-11-30");
    CHECK(calendar_bucket(at("2026-11-30T16:00:00Z"), shanghai, BucketSize::day) == "2026-12-01");
    CHECK(calendar_bucket(at("2026-11-30T16:30:00Z"), shanghai, BucketSize::hour) ==
          "2026-12-01T00");
    CHECK(calendar_bucket(at("2026-11-30T23:30:00Z"), TimeZone::utc(), BucketSize::hour) ==
          "2026-11-30T23");
}
