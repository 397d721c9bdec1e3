#include "idem/store/detail/redis_verdicts.hpp"
#include "idem/store/owned_files.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"

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
Timestamp at(long long seconds) {
    return Timestamp(std::chrono::seconds(seconds));
}

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
    auto keep = at(2'000'000'000);
    {
        auto store = open_store(parse_store_uri(path));
        CHECK(
            store->claim_nonce("stripe", "sig-1", {at(100), "a.ndjson", 1}, window, keep).verdict ==
            NonceVerdict::fresh);
        auto again = store->claim_nonce("stripe", "sig-1", {at(200), "a.ndjson", 2}, window, keep);
        CHECK(again.verdict == NonceVerdict::replay);
        CHECK(again.first_seen == at(100));
        CHECK(
            store->claim_nonce("github", "sig-1", {at(200), "a.ndjson", 2}, window, keep).verdict ==
            NonceVerdict::fresh); // scopes are apart
        store->commit();
    }
    {
        auto store = open_store(parse_store_uri(path));
        // The same record again (a rerun over the same file): never its own replay.
        CHECK(
            store->claim_nonce("stripe", "sig-1", {at(100), "a.ndjson", 1}, window, keep).verdict ==
            NonceVerdict::same_record);
        CHECK(
            store->claim_nonce("stripe", "sig-1", {at(200), "a.ndjson", 2}, window, keep).verdict ==
            NonceVerdict::replay);
        // Beyond the window of the kept sighting, by event time: fresh again.
        CHECK(
            store->claim_nonce("stripe", "sig-1", {at(401), "b.ndjson", 1}, window, keep).verdict ==
            NonceVerdict::fresh);
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

TEST_CASE("a finished run's checkpoint counts only for the same input") {
    auto path = temp_db();
    auto log = std::filesystem::temp_directory_path() /
               ("idem-store-test-" + std::to_string(::getpid()) + ".ndjson");
    { std::ofstream(log) << "{\"id\":1}\n"; }
    auto input = input_identity({log.string()});
    REQUIRE(input);
    CHECK(input_identity({log.string(), "-"}) == std::nullopt); // stdin cannot be recognized
    io::SilentDiagnostics quiet;
    {
        auto store = open_store(parse_store_uri(path));
        Checkpoint done;
        done.records_done = 7;
        done.file_bytes["output"] = 120;
        done.file_bytes["dups"] = 30;
        save_finished(*store, checkpoint_name("dedup", "default", "out.ndjson"), done, input);
        store->commit();
    }
    {
        auto store = open_store(parse_store_uri(path));
        auto again = find_resumption(*store, "dedup", "default", "out.ndjson", input, quiet);
        REQUIRE(again.checkpoint);
        CHECK(again.checkpoint->records_done == 7);
        CHECK(again.checkpoint->file_bytes.at("output") == 120);
        CHECK(again.checkpoint->file_bytes.at("dups") == 30);
        CHECK(again.checkpoint->finished_input == input);
        { std::ofstream(log, std::ios::app) << "{\"id\":2}\n"; } // the log grew
        auto grown = input_identity({log.string()});
        CHECK(grown != input);
        CHECK_FALSE(
            find_resumption(*store, "dedup", "default", "out.ndjson", grown, quiet).checkpoint);
        CHECK_FALSE(find_resumption(*store, "dedup", "default", "out.ndjson", std::nullopt, quiet)
                        .checkpoint);
    }
    std::filesystem::remove(log);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
}

TEST_CASE("verdicts are kept by file and line, a second one for a record replacing the first") {
    auto check = [](Store& store) {
        VerdictRecord valid{"capture.ndjson",    1,      true, "stripe", "evt_1",
                            "signature matches", at(100)};
        VerdictRecord replayed{
            "capture.ndjson", 3,       false,
            "stripe",         "evt_1", "replayed: this message was already delivered",
            at(101)};
        store.save_verdicts("verify", {valid, replayed});
        replayed.reason = "replayed: again";
        store.save_verdicts("verify", {replayed});
        store.save_verdicts("other", {valid});
        store.commit();
        std::vector<VerdictRecord> seen;
        store.for_each_verdict("verify", [&](const VerdictRecord& kept) { seen.push_back(kept); });
        REQUIRE(seen.size() == 2);
        CHECK(seen[0].line == 1);
        CHECK(seen[0].valid);
        CHECK(seen[0].message_id == "evt_1");
        CHECK(seen[0].checked_at == at(100));
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

TEST_CASE("a verdict's Redis encoding reads back, whatever its texts hold") {
    VerdictRecord verdict{
        "dir with space/cap:ture.ndjson", 42,   false, "github", "id with\nnewline",
        "bad signature: \"x\" 1 2",       at(7)};
    auto decoded =
        detail::decode_verdict(detail::verdict_field(verdict), detail::encode_verdict(verdict));
    REQUIRE(decoded);
    CHECK(decoded->source == verdict.source);
    CHECK(decoded->line == 42);
    CHECK_FALSE(decoded->valid);
    CHECK(decoded->scheme == "github");
    CHECK(decoded->message_id == verdict.message_id);
    CHECK(decoded->reason == verdict.reason);
    CHECK(decoded->checked_at == at(7));
    CHECK_FALSE(detail::decode_verdict("x", "1 2 3 4\nab"));
    CHECK_FALSE(detail::decode_verdict("1 f", "1 2 30 4\nab"));
}
