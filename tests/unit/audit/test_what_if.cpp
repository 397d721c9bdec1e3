// --what-if and --suggest as pure logic: dedup's judgement with other TTLs.

#include "idem/audit/what_if.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::audit;
using namespace std::chrono;

namespace {
Timestamp seconds_after_base(long long s) {
    return Timestamp(duration_cast<Duration>(seconds(1'796'000'000 + s)));
}
} // namespace

TEST_CASE("a copy past the TTL is missed and claims anew; one within it is caught") {
    WhatIfOptions options;
    options.ttls = {minutes(5), minutes(10)};
    options.suggest = true;
    WhatIfJudge judge(options);
    // 0, 6m (past 5m: a new claim), 10m (4m after that claim: caught at 5m)
    judge.add_key_group("\"k1\"",
                        {seconds_after_base(600), seconds_after_base(0), seconds_after_base(360)});
    auto result = judge.finish(seconds_after_base(0), seconds_after_base(3600), 60);
    REQUIRE(result.settings.size() == 2);
    CHECK(result.settings[0].duplicates == 2);
    CHECK(result.settings[0].caught == 1);
    CHECK(result.settings[0].missed == 1);
    REQUIRE(result.settings[0].examples.size() == 1);
    CHECK(result.settings[0].examples[0].after_claim == minutes(6));
    CHECK(result.settings[1].caught == 2); // 10m: both under the first claim
    // 60 keys an hour: a 5m TTL holds about 5 of them at once.
    CHECK(result.settings[0].held == 5);
    REQUIRE(result.suggestions.size() == 3);
    CHECK(result.suggestions[2].ttl == minutes(10)); // the longest delay, 10m, as written
    CHECK(result.delays[3] == 1);                    // 6m: under 10 minutes
    CHECK(result.delays[4] == 1);                    // 10m: under an hour
}

TEST_CASE("suggested TTLs are durations people write") {
    CHECK(round_up_ttl(seconds(0)) == seconds(1));
    CHECK(round_up_ttl(seconds(364)) == minutes(10));
    CHECK(round_up_ttl(minutes(61)) == hours(2));
    CHECK(round_up_ttl(hours(73)) == hours(168));
    CHECK(round_up_ttl(hours(24 * 9 + 1)) == hours(24 * 10));
}

TEST_CASE("another key: what dedup by it would have caught, missed and swallowed") {
    using std::chrono::minutes;
    AlternativeKeyJudge judge("order_id", minutes(5), 5);
    auto at = [](int minute) {
        return Timestamp(std::chrono::duration_cast<Duration>(minutes(minute)));
    };
    // ord_1: three copies, the last 6 minutes after the claim (missed, and it
    // claims anew); ord_2: two copies of different payloads (swallowed).
    auto intent = [](std::uint64_t value) {
        return AlternativeKeyJudge::FirstOfIntent{value, 0, {}};
    };
    judge.add("ord_1", at(0), intent(7));
    judge.add("ord_1", at(2), intent(7));
    judge.add("ord_1", at(8), intent(7));
    judge.add("ord_2", at(1), intent(7));
    judge.add("ord_2", at(3), intent(9));
    judge.add("", at(4), intent(7));             // no value at the key: not judged
    judge.add("ord_3", std::nullopt, intent(7)); // once, untimed
    auto setting = judge.finish();
    CHECK(setting.records == 6);
    CHECK(setting.duplicates == 3);
    CHECK(setting.caught == 2);
    CHECK(setting.missed == 1);
    REQUIRE(setting.examples.size() == 1);
    CHECK(setting.examples.front().key == "ord_1");
    CHECK(setting.examples.front().after_claim == minutes(8));
    CHECK(setting.conflicting_groups == 1);
    CHECK(setting.swallowed == 1);
    CHECK(setting.conflict_examples == std::vector<std::string>{"ord_2"});
    // Intents told apart as the groups tell them: 9 is 7 without its
    // per-delivery fields, so ord_2 swallows nothing.
    auto same = judge.finish([](std::uint64_t value) { return value == 9 ? 7 : value; });
    CHECK(same.conflicting_groups == 0);
    CHECK(same.swallowed == 0);
    CHECK(same.duplicates == 3);
}
