#include "idem/util/errors.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"
#include "support/instants.hpp"

#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <unistd.h>

using namespace idem;
using namespace std::chrono;

namespace {} // namespace

TEST_CASE("IANA zones come from the system's TZif files, daylight saving included") {
    auto new_york = TimeZone::load("America/New_York");
    CHECK(new_york.offset_at(test::instant("2026-07-01T12:00:00Z")) == hours(-4));
    CHECK(new_york.offset_at(test::instant("2026-12-01T12:00:00Z")) == hours(-5));
    // The 2026 spring change: 2026-03-08 07:00 UTC.
    CHECK(new_york.offset_at(test::instant("2026-03-08T06:59:59Z")) == hours(-5));
    CHECK(new_york.offset_at(test::instant("2026-03-08T07:00:00Z")) == hours(-4));
    CHECK(TimeZone::load("Asia/Shanghai").offset_at(test::instant("2026-11-30T00:00:00Z")) ==
          hours(8));
}

TEST_CASE("UTC and fixed offsets need no zone file") {
    CHECK(TimeZone::load("UTC").offset_at(test::instant("2026-11-30T00:00:00Z")) == seconds(0));
    CHECK(TimeZone::load("+05:30").offset_at(test::instant("2026-11-30T00:00:00Z")) ==
          minutes(330));
    CHECK(TimeZone::load("-08:00").offset_at(test::instant("2026-11-30T00:00:00Z")) == hours(-8));
    CHECK(TimeZone::load("+05:30").name() == "+05:30");
}

TEST_CASE("an unknown zone is a usage error that names it") {
    CHECK_THROWS_WITH_AS(
        (void)TimeZone::load("Mars/Olympus"),
        "unknown time zone 'Mars/Olympus': use an IANA name such as Asia/Shanghai, UTC, or an "
        "offset such as +08:00",
        UsageError);
    CHECK_THROWS_AS((void)TimeZone::load("../../etc/passwd"), UsageError);
    CHECK_THROWS_AS((void)TimeZone::load("/etc/localtime"), UsageError);
}

TEST_CASE("calendar buckets follow the zone's local date and hour") {
    auto shanghai = TimeZone::load("Asia/Shanghai");
    CHECK(calendar_bucket(test::instant("2026-11-30T15:59:59Z"), shanghai, BucketSize::day) ==
          "2026-11-30");
    CHECK(calendar_bucket(test::instant("2026-11-30T16:00:00Z"), shanghai, BucketSize::day) ==
          "2026-12-01");
    CHECK(calendar_bucket(test::instant("2026-11-30T16:30:00Z"), shanghai, BucketSize::hour) ==
          "2026-12-01T00");
    CHECK(calendar_bucket(test::instant("2026-11-30T23:30:00Z"), TimeZone::utc(),
                          BucketSize::hour) == "2026-11-30T23");
}

TEST_CASE("after 2037 the zone's rules still hold, in both hemispheres") {
    // The case: 04:30 UTC on 2040-07-01 is 00:30 EDT, the same day in New York.
    auto new_york = TimeZone::load("America/New_York");
    CHECK(new_york.offset_at(test::instant("2040-07-01T04:30:00Z")) == hours(-4));
    CHECK(calendar_bucket(test::instant("2040-07-01T04:30:00Z"), new_york, BucketSize::day) ==
          "2040-07-01");
    CHECK(new_york.offset_at(test::instant("2045-12-01T12:00:00Z")) == hours(-5));
    // Sydney: summer time in January, standard time in July; the 2026 change
    // back is 03:00 AEDT on 5 April, 16:00 UTC the day before.
    auto sydney = TimeZone::load("Australia/Sydney");
    CHECK(sydney.offset_at(test::instant("2026-01-15T00:00:00Z")) == hours(11));
    CHECK(sydney.offset_at(test::instant("2026-07-15T00:00:00Z")) == hours(10));
    CHECK(sydney.offset_at(test::instant("2026-04-04T15:59:59Z")) == hours(11));
    CHECK(sydney.offset_at(test::instant("2026-04-04T16:00:00Z")) == hours(10));
    CHECK(sydney.offset_at(test::instant("2045-01-15T00:00:00Z")) == hours(11));
    CHECK(calendar_bucket(test::instant("2045-01-14T13:30:00Z"), sydney, BucketSize::day) ==
          "2045-01-15");
}

TEST_CASE("a slim zone file, from TZDIR, is read through its POSIX rule") {
    // zic's default since 2020b lists transitions only until the rules stop
    // changing, then a POSIX TZ string. Compile New York's rules from the
    // system's tzdata source, as a slim file under a name of our own, into a
    // TZDIR of our own.
    std::ifstream tzdata("/usr/share/zoneinfo/tzdata.zi");
    if (!tzdata) {
        MESSAGE("no /usr/share/zoneinfo/tzdata.zi: the slim zone file case is not checked");
        return;
    }
    auto dir = std::filesystem::temp_directory_path() / ("idem-tz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    {
        std::ofstream source(dir / "slim.zi");
        std::string line;
        bool in_zone = false;
        while (std::getline(tzdata, line)) {
            bool starts_entry =
                line.starts_with("Z ") || line.starts_with("R ") || line.starts_with("L ");
            if (starts_entry) in_zone = false;
            if (line.starts_with("R u ") || line.starts_with("R NY ")) source << line << '\n';
            if (line.starts_with("Z America/New_York ")) {
                in_zone = true;
                source << "Z Idem/Slim_New_York " << line.substr(19) << '\n';
            } else if (in_zone) {
                source << line << '\n';
            }
        }
    }
    auto command = fmt::format("zic -b slim -d '{}' '{}' 2>/dev/null", dir.string(),
                               (dir / "slim.zi").string());
    if (std::system(command.c_str()) != 0) {
        MESSAGE("zic could not compile the zone: the slim zone file case is not checked");
        return;
    }
    auto* previous = std::getenv("TZDIR");
    std::string saved = previous ? previous : "";
    ::setenv("TZDIR", dir.c_str(), 1);
    auto slim = TimeZone::load("Idem/Slim_New_York");
    if (previous)
        ::setenv("TZDIR", saved.c_str(), 1);
    else
        ::unsetenv("TZDIR");
    CHECK(slim.offset_at(test::instant("2030-07-01T12:00:00Z")) == hours(-4));
    CHECK(slim.offset_at(test::instant("2030-12-01T12:00:00Z")) == hours(-5));
    CHECK(calendar_bucket(test::instant("2040-07-01T04:30:00Z"), slim, BucketSize::day) ==
          "2040-07-01");
    std::filesystem::remove_all(dir);
}

TEST_CASE("a wall-clock time without an offset is read in the zone given") {
    auto wall = *parse_timestamp("2026-11-30 09:00:00"); // read as UTC
    CHECK(lacks_utc_offset("2026-11-30 09:00:00"));
    CHECK(lacks_utc_offset("2026-11-30T09:00:00.250"));
    CHECK_FALSE(lacks_utc_offset("2026-11-30T09:00:00Z"));
    CHECK_FALSE(lacks_utc_offset("2026-11-30T09:00:00+01:00"));
    CHECK_FALSE(lacks_utc_offset("1764493200"));
    CHECK(format_rfc3339(TimeZone::load("Europe/Paris").from_local(wall)) ==
          "2026-11-30T08:00:00.000Z"); // CET, UTC+1
    CHECK(format_rfc3339(TimeZone::load("America/New_York")
                             .from_local(*parse_timestamp("2026-07-01 09:00:00.500"))) ==
          "2026-07-01T13:00:00.500Z"); // EDT
    CHECK(TimeZone::utc().from_local(wall) == wall);
}
