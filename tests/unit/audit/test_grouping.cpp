// The intent window (detail::split_by_window, docs/audit.md "The intent
// window"): one fingerprint within the window of its first record is one
// intent.

#include "idem/audit/detail/grouping.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::audit;

TEST_CASE("one fingerprint over several windows is several intents") {
    using std::chrono::hours;
    auto at = [](int hour) {
        return std::optional<Timestamp>(
            Timestamp(std::chrono::duration_cast<Duration>(hours(hour))));
    };
    // Fingerprint 1: hours 0, 5, 23 (one window), 49 and 50 (another); an
    // untimed record joins the first. Fingerprint 2: hours 0 and 30 (two).
    // Fingerprint 3 alone. Records are not in time order.
    std::vector<std::uint32_t> ids{1, 2, 1, 1, 1, 3, 1, 2, 1};
    std::vector<std::optional<Timestamp>> times{at(49), at(0),        at(0),  at(23), at(5),
                                                at(0),  std::nullopt, at(30), at(50)};
    auto distinct = detail::split_by_window(
        ids, 3, [&](std::size_t i) { return times[i]; }, hours(24));
    CHECK(distinct == 5);
    CHECK(ids[2] == 1);      // hour 0
    CHECK(ids[4] == 1);      // hour 5
    CHECK(ids[3] == 1);      // hour 23: within 24h of hour 0
    CHECK(ids[6] == 1);      // untimed
    CHECK(ids[0] == ids[8]); // hours 49 and 50
    CHECK(ids[0] > 3);
    CHECK(ids[1] == 2);
    CHECK(ids[7] > 3);
    CHECK(ids[7] != ids[0]);
    CHECK(ids[5] == 3);
    // A window as wide as the log leaves every id as it was.
    std::vector<std::uint32_t> same{1, 2, 1, 1, 1, 3, 1, 2, 1};
    CHECK(detail::split_by_window(
              same, 3, [&](std::size_t i) { return times[i]; }, hours(100)) == 3);
    CHECK(same == std::vector<std::uint32_t>{1, 2, 1, 1, 1, 3, 1, 2, 1});
}
