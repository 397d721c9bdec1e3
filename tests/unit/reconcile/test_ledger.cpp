// The reconciliation of keys across stages, as pure logic: every finding,
// the grace, the funnel's figures and latency percentiles.

#include "idem/reconcile/ledger.hpp"

#include <algorithm>
#include <doctest/doctest.h>

using namespace idem;
using namespace idem::reconcile;

namespace {
Timestamp seconds_into_the_day(int seconds) {
    return Timestamp(std::chrono::seconds(1'764'489'600 + seconds));
}
std::uint64_t count(const Reconciliation& r, Finding finding) {
    return r.counts[static_cast<std::size_t>(finding)];
}
} // namespace

TEST_CASE("every finding between three stages") {
    LedgerOptions options;
    options.stages = {"sent", "received", "processed"};
    options.grace = std::chrono::seconds(60);
    options.sla = std::chrono::seconds(10);
    Ledger ledger(options);
    auto see = [&](std::size_t stage, const char* key, int seconds, std::uint64_t payload = 7) {
        ledger.count_record(stage);
        ledger.see(stage, key, seconds_into_the_day(seconds), payload);
    };
    see(0, "ok", 0);
    see(1, "ok", 1);
    see(2, "ok", 2);
    see(0, "lost-1", 0); // never received
    see(0, "lost-2", 0);
    see(1, "lost-2", 1); // received, never processed
    see(0, "dup", 0);
    see(1, "dup", 1);
    see(1, "dup", 2); // two copies received
    see(2, "dup", 3);
    see(0, "slow", 0);
    see(1, "slow", 30); // over the 10 s SLA
    see(2, "slow", 31);
    see(0, "changed", 0);
    see(1, "changed", 1, 8); // another payload at received
    see(2, "changed", 2, 8);
    see(2, "orphan", 5);    // processed, sent by no one
    see(0, "pending", 100); // not received yet, but within the grace
    auto r = ledger.reconcile(seconds_into_the_day(120));
    CHECK(count(r, Finding::lost) == 2);
    CHECK(count(r, Finding::duplicated) == 1);
    CHECK(count(r, Finding::late) == 1);
    CHECK(count(r, Finding::changed) == 1);
    CHECK(count(r, Finding::orphan) == 1);
    REQUIRE(r.hops.size() == 2);
    CHECK(r.hops[0].keys == 7);
    CHECK(r.hops[0].lost == 1);
    CHECK(r.hops[0].pending == 1);
    CHECK(r.hops[0].reached == 5);
    CHECK(r.hops[0].loss_rate == doctest::Approx(1.0 / 6));
    CHECK(r.hops[1].lost == 1);
    CHECK(r.stages[1].duplicated_keys == 1);
    CHECK(r.stages[1].extra_copies == 1);
    CHECK(r.stages[2].orphans == 1);
    CHECK(r.missing.at("lost-1") == 0);
    CHECK(r.missing.at("lost-2") == 0); // sent holds it first
    CHECK(r.hops[0].p50_ms == doctest::Approx(1000.0));
    CHECK(r.hops[0].p99_ms == doctest::Approx(30000.0));
}

TEST_CASE("without times, every absent key is lost and no latency is made up") {
    LedgerOptions options;
    options.stages = {"a", "b"};
    Ledger ledger(options);
    ledger.see(0, "x", std::nullopt, 0);
    ledger.see(0, "y", std::nullopt, 0);
    ledger.see(1, "y", std::nullopt, 0);
    auto r = ledger.reconcile(std::nullopt);
    CHECK(r.hops[0].lost == 1);
    CHECK_FALSE(r.hops[0].p50_ms);
    CHECK(count(r, Finding::changed) == 0); // no payloads: nothing compared
}

TEST_CASE("examples are the smallest keys, whatever order the keys came in") {
    LedgerOptions options;
    options.stages = {"a", "b"};
    options.examples = 2;
    for (int order = 0; order < 2; ++order) {
        Ledger ledger(options);
        std::vector<std::string> keys{"k3", "k1", "k4", "k2"};
        if (order) std::reverse(keys.begin(), keys.end());
        for (const auto& key : keys)
            ledger.see(0, key, std::nullopt, 0);
        auto r = ledger.reconcile(std::nullopt);
        auto& examples = r.examples[static_cast<std::size_t>(Finding::lost)];
        REQUIRE(examples.size() == 2);
        CHECK(examples[0].key == "k1");
        CHECK(examples[1].key == "k2");
    }
}

TEST_CASE("T+1: pending keys are carried with what was reported, and reported once") {
    LedgerOptions options;
    options.stages = {"sent", "received", "processed"};
    options.grace = std::chrono::seconds(60);
    options.sla = std::chrono::seconds(10);
    options.carry_pending = true;
    Ledger day1(options);
    day1.see(0, "late-dup", seconds_into_the_day(0), 1, "acct_1");
    day1.see(0, "late-dup", seconds_into_the_day(1), 1); // duplicated at sent: reported today
    day1.see(1, "late-dup", seconds_into_the_day(30),
             1); // late at sent -> received: reported today
    day1.see(0, "done", seconds_into_the_day(0), 1);
    day1.see(1, "done", seconds_into_the_day(1), 1);
    day1.see(2, "done", seconds_into_the_day(2), 1);
    day1.see(0, "lost", seconds_into_the_day(-100), 1); // past the grace: lost today, not carried
    auto first = day1.reconcile(seconds_into_the_day(40));
    CHECK(count(first, Finding::duplicated) == 1);
    CHECK(count(first, Finding::late) == 1);
    CHECK(count(first, Finding::lost) == 1);
    REQUIRE(first.carry.size() == 1);
    const auto& carried = first.carry.front();
    CHECK(carried.key == "late-dup");
    CHECK(carried.group == "acct_1");
    CHECK(carried.reported == ((1U << 0) | (1U << k_reported_late)));

    // Through the store's bytes and back.
    auto bytes = encode_carried(carried);
    auto decoded = decode_carried("late-dup", bytes, 3);
    REQUIRE(decoded.has_value());
    CHECK(decoded->reported == carried.reported);
    CHECK(decoded->sightings[0].count == 2);
    CHECK(decoded->sightings[1].first_us == carried.sightings[1].first_us);
    CHECK_FALSE(decode_carried("late-dup", bytes, 2).has_value()); // other stages
    CHECK_FALSE(decode_carried("late-dup", bytes.substr(0, bytes.size() - 1), 3).has_value());

    Ledger day2(options);
    day2.carry_in(*decoded);
    day2.see(2, "late-dup", seconds_into_the_day(200),
             2); // processed the next day, another payload
    auto second = day2.reconcile(seconds_into_the_day(300));
    CHECK(second.carried_in == 1);
    CHECK(count(second, Finding::duplicated) == 0); // reported yesterday
    CHECK(count(second, Finding::late) == 1);       // received -> processed: new today
    CHECK(count(second, Finding::changed) == 1);    // received -> processed: new today
    CHECK(count(second, Finding::orphan) == 0);
    CHECK(second.hops[1].reached == 1);
    CHECK(second.carry.empty());
}

#include "idem/reconcile/spill.hpp"

#include <filesystem>
#include <random>

TEST_CASE("nth_value finds the nearest-rank value with a bounded table, as sorting would") {
    std::mt19937_64 random(7);
    for (int round = 0; round < 20; ++round) {
        std::vector<std::int64_t> values(1 + random() % 5000);
        auto spread = round % 4 == 0 ? 3 : round % 4 == 1 ? 1'000'000 : (1LL << 40);
        for (auto& value : values)
            value = static_cast<std::int64_t>(random() % static_cast<std::uint64_t>(spread)) -
                    (round % 3 == 0 ? spread / 2 : 0); // negatives too (clock skew)
        auto sorted = values;
        std::sort(sorted.begin(), sorted.end());
        auto pass = [&](const std::function<void(std::int64_t)>& see) {
            for (auto value : values)
                see(value);
        };
        for (std::uint64_t rank : {std::uint64_t{1}, std::uint64_t{values.size()},
                                   std::uint64_t{(values.size() + 1) / 2}}) {
            CHECK(nth_value(values.size(), rank, pass) == sorted[rank - 1]);
        }
    }
}

TEST_CASE("a spill hands back each key's parts, merged as one ledger would have them") {
    LedgerOptions options;
    options.stages = {"a", "b"};
    options.grace = std::chrono::seconds(0);
    Ledger whole(options), first(options);
    auto see = [&](Ledger& ledger, std::size_t stage, const std::string& key, int seconds,
                   std::uint64_t payload) {
        ledger.count_record(stage);
        ledger.see(stage, key, seconds_into_the_day(seconds), payload);
    };
    KeySpill spill(std::filesystem::temp_directory_path(), 2);
    for (int i = 0; i < 300; ++i) {
        auto key = "k" + std::to_string(i % 120);
        auto stage = static_cast<std::size_t>(i % 7 == 0 ? 1 : 0);
        see(whole, stage, key, i, 1 + static_cast<std::uint64_t>(i % 3 == 0));
        see(first, stage, key, i, 1 + static_cast<std::uint64_t>(i % 3 == 0));
        if (i % 50 == 49) first.drain([&](const CarriedKey& carried) { spill.add(carried); });
    }
    first.drain([&](const CarriedKey& carried) { spill.add(carried); });
    Reconciliation total;
    for (std::size_t p = 0; p < KeySpill::k_partitions; ++p) {
        Ledger part(options);
        spill.read(p, [&](const CarriedKey& key) { part.merge_in(key); });
        auto judged = part.judge(seconds_into_the_day(1000));
        add_reconciliation(total, std::move(judged));
    }
    finish_reconciliation(total, options);
    auto expected = whole.reconcile(seconds_into_the_day(1000));
    CHECK(total.keys == expected.keys);
    CHECK(total.counts == expected.counts);
    CHECK(total.hops[0].lost == expected.hops[0].lost);
    CHECK(total.hops[0].p50_ms == expected.hops[0].p50_ms);
    CHECK(total.stages[0].duplicated_keys == expected.stages[0].duplicated_keys);
    REQUIRE(total.examples[0].size() == expected.examples[0].size());
    for (std::size_t i = 0; i < total.examples[0].size(); ++i)
        CHECK(total.examples[0][i].key == expected.examples[0][i].key);
}

TEST_CASE("T+1: a key an earlier run settled is duplicated when it comes again, not an orphan") {
    LedgerOptions options;
    options.stages = {"sent", "charged"};
    options.grace = std::chrono::minutes(15);
    options.report_settled = true;
    Ledger day1(options);
    day1.see(0, "ord_1", seconds_into_the_day(0), 1);
    day1.see(1, "ord_1", seconds_into_the_day(2), 1);
    auto first = day1.reconcile(seconds_into_the_day(10));
    REQUIRE(first.settled.size() == 1);
    RememberedKeys remembered(2);
    auto decoded = decode_remembered(std::get<1>(first.settled.front()), 2);
    REQUIRE(decoded);
    CHECK(decoded->stages[1].first_us == seconds_into_the_day(2).time_since_epoch().count());
    remembered.add("ord_1", *decoded);

    options.remembered = &remembered;
    options.remember = std::chrono::hours(24 * 7);
    Ledger day2(options);
    day2.see(1, "ord_1", seconds_into_the_day(86'400), 1); // charged again, not sent again
    auto second = day2.reconcile(seconds_into_the_day(86'400));
    CHECK(count(second, Finding::orphan) == 0);
    CHECK(count(second, Finding::duplicated) == 1);
    CHECK(second.seen_before == 1);
    CHECK(second.examples[static_cast<std::size_t>(Finding::duplicated)].front().detail.find(
              "first processed there") != std::string::npos);

    // Past --remember it is new again: an orphan.
    options.remember = std::chrono::hours(1);
    Ledger later(options);
    later.see(1, "ord_1", seconds_into_the_day(86'400), 1);
    CHECK(count(later.reconcile(seconds_into_the_day(86'400)), Finding::orphan) == 1);
}
