#include "idem/store/checkpoints.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "idem/util/errors.hpp"
#include "support/instants.hpp"

#include <atomic>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace idem;
using namespace idem::store;
using namespace std::chrono;

namespace {

std::string temp_db() {
    auto path = std::filesystem::temp_directory_path() /
                ("idem-store-test-" + std::to_string(::getpid()) + ".db");
    std::filesystem::remove(path);
    return path.string();
}
} // namespace

TEST_CASE("store URIs") {
    CHECK(parse_store_uri("idem.db").kind == StoreKind::sqlite);
    CHECK(parse_store_uri("sqlite:/tmp/x.db").path == "/tmp/x.db");
    CHECK(parse_store_uri(":memory:").kind == StoreKind::memory);
    auto redis = parse_store_uri("redis://127.0.0.1:6380/2");
    CHECK(redis.kind == StoreKind::redis);
    CHECK(redis.port == 6380);
    CHECK(redis.database == 2);
    CHECK_THROWS_AS((void)parse_store_uri("postgres://x"), UsageError);
}

TEST_CASE("a nonce seen in one run is judged by the same rule in the next") {
    auto path = temp_db();
    auto window = std::chrono::seconds(300);
    auto keep = test::unix_seconds(2'000'000'000);
    {
        auto store = open_store(parse_store_uri(path));
        CHECK(store->nonces()
                  .claim_nonce("stripe", "sig-1", {test::unix_seconds(100), "a.ndjson", 1}, window,
                               keep)
                  .verdict == NonceVerdict::fresh);
        auto again = store->nonces().claim_nonce(
            "stripe", "sig-1", {test::unix_seconds(200), "a.ndjson", 2}, window, keep);
        CHECK(again.verdict == NonceVerdict::replay);
        CHECK(again.first_seen == test::unix_seconds(100));
        CHECK(store->nonces()
                  .claim_nonce("github", "sig-1", {test::unix_seconds(200), "a.ndjson", 2}, window,
                               keep)
                  .verdict == NonceVerdict::fresh); // scopes are apart
        store->commit();
    }
    {
        auto store = open_store(parse_store_uri(path));
        // The same record again (a rerun over the same file): never its own replay.
        CHECK(store->nonces()
                  .claim_nonce("stripe", "sig-1", {test::unix_seconds(100), "a.ndjson", 1}, window,
                               keep)
                  .verdict == NonceVerdict::same_record);
        CHECK(store->nonces()
                  .claim_nonce("stripe", "sig-1", {test::unix_seconds(200), "a.ndjson", 2}, window,
                               keep)
                  .verdict == NonceVerdict::replay);
        // Beyond the window of the kept sighting, by event time: fresh again.
        CHECK(store->nonces()
                  .claim_nonce("stripe", "sig-1", {test::unix_seconds(401), "b.ndjson", 1}, window,
                               keep)
                  .verdict == NonceVerdict::fresh);
        store->commit();
    }
    std::filesystem::remove(path);
}

TEST_CASE("an unopenable store is a store error naming it") {
    CHECK_THROWS_AS((void)open_store(parse_store_uri("/nonexistent-dir/x.db")), StoreError);
}

TEST_CASE("processes creating the same store file at once all open it") {
    // CI once failed here: four dedup processes started together, and one was
    // refused "database is locked" while turning the new file to WAL.
    for (int round = 0; round < 20; ++round) {
        auto path = temp_db();
        std::atomic<int> opened{0};
        std::vector<std::string> errors(6);
        std::vector<std::thread> openers;
        for (std::size_t i = 0; i < errors.size(); ++i) {
            openers.emplace_back([&, i] {
                try {
                    if (open_store(parse_store_uri(path))) ++opened;
                } catch (const std::exception& error) {
                    errors[i] = error.what();
                }
            });
        }
        for (auto& opener : openers)
            opener.join();
        for (const auto& error : errors)
            CHECK_MESSAGE(error.empty(), error);
        CHECK(opened == static_cast<int>(errors.size()));
        std::filesystem::remove(path);
        std::filesystem::remove(path + "-wal");
        std::filesystem::remove(path + "-shm");
    }
}

TEST_CASE("verdicts are kept by file and line, a second one for a record replacing the first") {
    auto check = [](Store& store) {
        VerdictRecord valid{"capture.ndjson",       1, true, "stripe", "evt_1", "signature matches",
                            test::unix_seconds(100)};
        VerdictRecord replayed{"capture.ndjson",
                               3,
                               false,
                               "stripe",
                               "evt_1",
                               "replayed: this message was already delivered",
                               test::unix_seconds(101)};
        store.verdicts().save_verdicts("verify", {valid, replayed});
        replayed.reason = "replayed: again";
        store.verdicts().save_verdicts("verify", {replayed});
        store.verdicts().save_verdicts("other", {valid});
        store.commit();
        std::vector<VerdictRecord> seen;
        store.verdicts().for_each_verdict("verify",
                                          [&](const VerdictRecord& kept) { seen.push_back(kept); });
        REQUIRE(seen.size() == 2);
        CHECK(seen[0].line == 1);
        CHECK(seen[0].valid);
        CHECK(seen[0].message_id == "evt_1");
        CHECK(seen[0].checked_at == test::unix_seconds(100));
        CHECK(seen[1].line == 3);
        CHECK_FALSE(seen[1].valid);
        CHECK(seen[1].reason == "replayed: again");
    };
    auto memory = open_store(parse_store_uri(":memory:"));
    check(*memory);
    auto path = temp_db();
    {
        auto file = open_store(parse_store_uri(path));
        check(*file);
    }
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
}
