// covering_durations: the durations people write that cover 99%, 99.9% and
// all of a set of delays (audit --suggest, reorder --suggest).

#include "idem/util/time.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace std::chrono;

TEST_CASE("covering durations are quantiles rounded up to durations people write") {
    CHECK(covering_durations({}).empty());
    // 1000 delays: 990 of 2 s, 9 of 40 s, one of 3 h.
    std::vector<std::int64_t> delays(990, 2'000'000);
    delays.insert(delays.end(), 9, 40'000'000);
    delays.push_back(duration_cast<microseconds>(hours(3)).count());
    auto covering = covering_durations(delays);
    REQUIRE(covering.size() == 3);
    CHECK(covering[0].coverage == 0.99);
    CHECK(covering[0].duration == seconds(5)); // the 990th delay, 2 s
    CHECK(covering[1].duration == minutes(1)); // the 999th, 40 s
    CHECK(covering[2].duration == hours(6));   // all of them: 3 h
    CHECK(round_up_to_written_duration(seconds(0)) == seconds(1));
    CHECK(round_up_to_written_duration(hours(24 * 9 + 1)) == hours(24 * 10));
}
