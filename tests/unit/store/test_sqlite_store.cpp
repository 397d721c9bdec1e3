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

TEST_CASE("a nonce claimed in one run is seen by the next, until it expires") {
    auto path = temp_db();
    {
        auto store = open_store(parse_store_uri(path));
        CHECK(store->claim_nonce("stripe", "sig-1", at(100), at(400)).fresh);
        auto again = store->claim_nonce("stripe", "sig-1", at(200), at(500));
        CHECK_FALSE(again.fresh);
        CHECK(again.first_seen == at(100));
        CHECK(store->claim_nonce("github", "sig-1", at(200), at(500)).fresh); // scopes are apart
        store->commit();
    }
    {
        auto store = open_store(parse_store_uri(path));
        CHECK_FALSE(store->claim_nonce("stripe", "sig-1", at(300), at(600)).fresh);
        CHECK(
            store->claim_nonce("stripe", "sig-1", at(401), at(700)).fresh); // expired: claimed anew
        store->commit();
    }
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
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
