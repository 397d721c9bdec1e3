#include "idem/store/checkpoints.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <unistd.h>

using namespace idem;
using namespace idem::store;

namespace {

ReplayEntry finished(std::string key, ReplayState state, bool permanent = false) {
    ReplayEntry entry;
    entry.key = std::move(key);
    entry.state = state;
    entry.owner = "run-a";
    entry.attempts = 2;
    entry.status = state == ReplayState::completed ? 201 : 422;
    entry.latency_ms = 12;
    entry.permanent = permanent;
    entry.error = state == ReplayState::failed ? "http 422" : "";
    entry.response_digest = "ab12";
    entry.response_head = std::string("{\"ok\":\0}", 8);
    entry.updated_at = test::unix_seconds(100);
    return entry;
}

std::vector<bool> granted(const std::vector<ReplayClaim>& claims) {
    std::vector<bool> result;
    for (const auto& claim : claims)
        result.push_back(claim.granted);
    return result;
}

void check_ledger(Store& store) {
    auto first = store.replay_ledger().claim_replays("r", {"k1", "k2", "k3", "k4"}, "run-a",
                                                     test::unix_seconds(100),
                                                     test::unix_seconds(160), ReplayRerun::resume);
    CHECK(granted(first) == std::vector<bool>{true, true, true, true});
    CHECK_FALSE(first[0].previous);
    store.replay_ledger().save_replay_entries("r", {finished("k1", ReplayState::completed),
                                                    finished("k2", ReplayState::failed, true),
                                                    finished("k3", ReplayState::failed, false)});
    store.commit();

    // Another run, while run-a's lease on k4 holds: only the transient failure.
    auto second = store.replay_ledger().claim_replays("r", {"k1", "k2", "k3", "k4", "k5"}, "run-b",
                                                      test::unix_seconds(120),
                                                      test::unix_seconds(180), ReplayRerun::resume);
    CHECK(granted(second) == std::vector<bool>{false, false, true, false, true});
    REQUIRE(second[0].previous);
    CHECK(second[0].previous->state == ReplayState::completed);
    CHECK(second[0].previous->status == 201);
    CHECK(second[0].previous->response_head == std::string("{\"ok\":\0}", 8));
    CHECK(second[2].previous->attempts == 2);
    CHECK(second[3].previous->owner == "run-a");
    store.commit();

    // run-a died: once its lease runs out, k4 is taken over.
    CHECK(granted(store.replay_ledger().claim_replays(
              "r", {"k4"}, "run-c", test::unix_seconds(159), test::unix_seconds(220),
              ReplayRerun::resume)) == std::vector<bool>{false});
    CHECK(granted(store.replay_ledger().claim_replays(
              "r", {"k4"}, "run-c", test::unix_seconds(160), test::unix_seconds(220),
              ReplayRerun::resume)) == std::vector<bool>{true});
    store.replay_ledger().renew_replay_leases("r", {"k4"}, "run-c", test::unix_seconds(400));
    store.replay_ledger().renew_replay_leases("r", {"k5"}, "run-c",
                                              test::unix_seconds(400)); // run-b's: untouched
    store.commit();
    CHECK(granted(store.replay_ledger().claim_replays(
              "r", {"k4", "k5"}, "run-d", test::unix_seconds(300), test::unix_seconds(360),
              ReplayRerun::resume)) == std::vector<bool>{false, true});

    CHECK(granted(store.replay_ledger().claim_replays(
              "r", {"k1", "k2"}, "run-e", test::unix_seconds(500), test::unix_seconds(560),
              ReplayRerun::retry_failed)) == std::vector<bool>{false, true});
    CHECK(granted(store.replay_ledger().claim_replays(
              "r", {"k1"}, "run-e", test::unix_seconds(500), test::unix_seconds(560),
              ReplayRerun::force)) == std::vector<bool>{true});
    store.commit();

    std::vector<std::string> keys;
    store.replay_ledger().for_each_replay_entry(
        "r", [&](const ReplayEntry& entry) { keys.push_back(entry.key); });
    CHECK(keys == std::vector<std::string>{"k1", "k2", "k3", "k4", "k5"});
    store.replay_ledger().for_each_replay_entry("other",
                                                [](const ReplayEntry&) { FAIL("another scope"); });
}

} // namespace

TEST_CASE("the claim rule: who may send a key now") {
    CHECK(may_claim_replay(std::nullopt, test::unix_seconds(1), ReplayRerun::resume));
    auto held = finished("k", ReplayState::in_progress);
    held.lease_until = test::unix_seconds(10);
    CHECK_FALSE(may_claim_replay(held, test::unix_seconds(9), ReplayRerun::force));
    CHECK(may_claim_replay(held, test::unix_seconds(10), ReplayRerun::resume));
    auto done = finished("k", ReplayState::completed);
    CHECK_FALSE(may_claim_replay(done, test::unix_seconds(1), ReplayRerun::retry_failed));
    CHECK(may_claim_replay(done, test::unix_seconds(1), ReplayRerun::force));
    auto gone = finished("k", ReplayState::failed, true);
    CHECK_FALSE(may_claim_replay(gone, test::unix_seconds(1), ReplayRerun::resume));
    CHECK(may_claim_replay(gone, test::unix_seconds(1), ReplayRerun::retry_failed));
    CHECK(may_claim_replay(finished("k", ReplayState::failed), test::unix_seconds(1),
                           ReplayRerun::resume));
}

TEST_CASE("the replay ledger in the memory store") {
    auto store = open_store(parse_store_uri(":memory:"));
    check_ledger(*store);
}

TEST_CASE("the replay ledger in a SQLite file survives reopening") {
    auto path = (std::filesystem::temp_directory_path() /
                 ("idem-ledger-test-" + std::to_string(::getpid()) + ".db"))
                    .string();
    std::filesystem::remove(path);
    {
        auto store = open_store(parse_store_uri(path));
        check_ledger(*store);
    }
    auto reopened = open_store(parse_store_uri(path));
    int entries = 0;
    reopened->replay_ledger().for_each_replay_entry("r", [&](const ReplayEntry&) { ++entries; });
    CHECK(entries == 5);
    for (const auto* suffix : {"", "-wal", "-shm"})
        std::filesystem::remove(path + suffix);
}
