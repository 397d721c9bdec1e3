// A store written by an older idem opens in this one: its schema migrates
// in place and what it held reads back through the roles of today.

#include "idem/store/held_copies.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"
#include "idem/store/store.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <sqlite3.h>
#include <unistd.h>

using namespace idem;
using namespace idem::store;

namespace {

void execute(sqlite3* db, const std::string& sql) {
    char* error = nullptr;
    int status = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
    std::string message = error ? error : "";
    sqlite3_free(error);
    REQUIRE_MESSAGE(status == SQLITE_OK, message);
}

// A store file as idem left it at schema version `version`: the same
// migrations, stopped there.
void write_store_at_version(const std::string& path, int version) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    for (int next = 1; next <= version; ++next)
        execute(db, detail::k_migrations[next]);
    execute(db, "PRAGMA user_version = " + std::to_string(version));
    // What `dedup --keep last -o out.ndjson` held at schema v6, when it was
    // killed: its copies in reorder's table, under a scope of their own.
    execute(db, "INSERT INTO reorder_held(scope, id, partition, key_primary, key_secondary, "
                "arrival_us, record) VALUES("
                "'dedup held dedup default /tmp/out.ndjson', 3, "
                "CAST('00112233445566778899aabbccddeeff logs/day 1.ndjson' AS BLOB), "
                "1700000000000000, 41, 1700000000000000, CAST('{\"id\":\"a\"}' AS BLOB)),"
                "('dedup held dedup default /tmp/out.ndjson', 5, "
                "CAST('ffeeddccbbaa99887766554433221100 logs/day 2.ndjson' AS BLOB), "
                "1700000005000000, 7, 1700000005000000, CAST('{\"id\":\"b\"}' AS BLOB)),"
                "('orders', 9, CAST('p1' AS BLOB), 12, 0, 1700000000000000, "
                "CAST('{\"seq\":12}' AS BLOB))");
    sqlite3_close(db);
}

} // namespace

TEST_CASE("a store written at schema v6 holds its dedup --keep last copies after migrating") {
    auto path = (std::filesystem::temp_directory_path() /
                 ("idem-migration-test-" + std::to_string(::getpid()) + ".db"))
                    .string();
    std::filesystem::remove(path);
    write_store_at_version(path, 6);
    {
        auto store = open_store(parse_store_uri(path));
        auto copies = store->held_copies().load_held_copies("dedup default /tmp/out.ndjson");
        REQUIRE(copies.size() == 2);
        CHECK(copies[0].id == 3);
        CHECK(copies[0].fingerprint[0] == 0x00);
        CHECK(copies[0].fingerprint[15] == 0xff);
        CHECK(copies[0].source == "logs/day 1.ndjson");
        CHECK(copies[0].line == 41);
        CHECK(copies[0].event_time == Timestamp(Duration(1700000000000000)));
        CHECK(copies[0].bytes == "{\"id\":\"a\"}");
        CHECK(copies[1].id == 5);
        CHECK(copies[1].source == "logs/day 2.ndjson");
        // They left reorder's table; reorder's own rows stayed.
        CHECK(store->sequencer().load_held("dedup held dedup default /tmp/out.ndjson").empty());
        auto orders = store->sequencer().load_held("orders");
        REQUIRE(orders.size() == 1);
        CHECK(orders[0].bytes == "{\"seq\":12}");
        // And the copies live on in their own table.
        HeldCopyChanges changes;
        changes.released = {3};
        store->held_copies().save_held_copies("dedup default /tmp/out.ndjson", changes);
        store->commit();
    }
    auto reopened = open_store(parse_store_uri(path));
    auto copies = reopened->held_copies().load_held_copies("dedup default /tmp/out.ndjson");
    REQUIRE(copies.size() == 1);
    CHECK(copies[0].id == 5);
    std::filesystem::remove(path);
    std::filesystem::remove(path + "-wal");
    std::filesystem::remove(path + "-shm");
}

TEST_CASE("a store newer than this idem is refused, not rewritten") {
    auto path = (std::filesystem::temp_directory_path() /
                 ("idem-migration-newer-" + std::to_string(::getpid()) + ".db"))
                    .string();
    std::filesystem::remove(path);
    {
        sqlite3* db = nullptr;
        REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
        execute(db, "PRAGMA user_version = " + std::to_string(detail::k_schema_version + 1));
        sqlite3_close(db);
    }
    CHECK_THROWS_WITH_AS((void)open_store(parse_store_uri(path)),
                         doctest::Contains("newer than this idem"), StoreError);
    std::filesystem::remove(path);
}
