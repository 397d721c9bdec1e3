#include "idem/store/checkpoints.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <unistd.h>

using namespace idem;
using namespace idem::store;

namespace {

ReorderChanges some_changes() {
    ReorderChanges changes;
    changes.progress.push_back({"s1:a", true, {8, 0}, {0, 0}});
    changes.progress.push_back({std::string("s3:\0b\n", 6), false, {0, 0}, {5, 2}});
    changes.held.push_back(
        {3, "s1:a", {10, 0}, Timestamp(std::chrono::seconds(7)), std::string("{\"n\":10}\0x", 10)});
    changes.held.push_back({4, "s1:a", {11, 0}, Timestamp(std::chrono::seconds(8)), ""});
    changes.held.push_back({5, "s1:a", {12, 0}, Timestamp(std::chrono::seconds(9)), "{}"});
    return changes;
}

void check_round_trip(Store& store) {
    store.sequencer().save_reorder_changes("stream", some_changes());
    store.commit();
    auto progress =
        store.sequencer().load_partitions("stream", {"s1:a", "s1:z", std::string("s3:\0b\n", 6)});
    REQUIRE(progress.size() == 3);
    REQUIRE(progress[0]);
    CHECK(progress[0]->started);
    CHECK(progress[0]->next == OrderKey{8, 0});
    CHECK_FALSE(progress[1]);
    REQUIRE(progress[2]);
    CHECK_FALSE(progress[2]->started);
    CHECK(progress[2]->highest == OrderKey{5, 2});
    CHECK(store.sequencer().load_partitions("other", {"s1:a"})[0] == std::nullopt);

    ReorderChanges released;
    released.released = {4};
    released.progress.push_back({"s1:a", true, {9, 0}, {0, 0}});
    store.sequencer().save_reorder_changes("stream", released);
    store.commit();
    auto held = store.sequencer().load_held("stream");
    REQUIRE(held.size() == 2);
    CHECK(held[0].id == 3);
    CHECK(held[0].bytes == std::string("{\"n\":10}\0x", 10));
    CHECK(held[0].arrival == Timestamp(std::chrono::seconds(7)));
    CHECK(held[1].id == 5);
    CHECK(held[1].key == OrderKey{12, 0});
    CHECK(store.sequencer().load_partitions("stream", {"s1:a"})[0]->next == OrderKey{9, 0});

    store.sequencer().clear_reorder_state("stream");
    store.commit();
    CHECK(store.sequencer().load_held("stream").empty());
    CHECK_FALSE(store.sequencer().load_partitions("stream", {"s1:a"})[0]);
}

} // namespace

TEST_CASE("reorder state round-trips through the memory store") {
    auto store = open_store(parse_store_uri(":memory:"));
    check_round_trip(*store);
}

TEST_CASE("reorder state round-trips through a SQLite file, and only committed changes count") {
    auto path = (std::filesystem::temp_directory_path() /
                 ("idem-reorder-test-" + std::to_string(::getpid()) + ".db"))
                    .string();
    std::filesystem::remove(path);
    {
        auto store = open_store(parse_store_uri(path));
        check_round_trip(*store);
        store->sequencer().save_reorder_changes("stream", some_changes()); // never committed
    }
    auto reopened = open_store(parse_store_uri(path));
    CHECK(reopened->sequencer().load_held("stream").empty());
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
}
