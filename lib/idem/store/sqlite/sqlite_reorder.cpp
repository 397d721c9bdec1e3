#include "idem/store/sqlite/sqlite_reorder.hpp"

#include <fmt/format.h>

namespace idem::store::detail {

namespace {

OrderKey key_of(sqlite3_stmt* statement, int column) {
    return {sqlite3_column_int64(statement, column),
            static_cast<std::uint64_t>(sqlite3_column_int64(statement, column + 1))};
}

} // namespace

SqliteReorderTables::SqliteReorderTables(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name),
      m_find_partition(db,
                       "SELECT started, next_primary, next_secondary, highest_primary, "
                       "highest_secondary FROM reorder_partitions WHERE scope = ?1 AND "
                       "partition = ?2",
                       store_name),
      m_save_partition(db,
                       "INSERT OR REPLACE INTO reorder_partitions(scope, partition, started, "
                       "next_primary, next_secondary, highest_primary, highest_secondary) "
                       "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                       store_name),
      m_load_held(db,
                  "SELECT id, partition, key_primary, key_secondary, arrival_us, record FROM "
                  "reorder_held WHERE scope = ?1 ORDER BY id",
                  store_name),
      m_save_held(db,
                  "INSERT OR REPLACE INTO reorder_held(scope, id, partition, key_primary, "
                  "key_secondary, arrival_us, record) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                  store_name),
      m_drop_held(db, "DELETE FROM reorder_held WHERE scope = ?1 AND id = ?2", store_name) {}

void SqliteReorderTables::step_done(sqlite3_stmt* statement) {
    detail::step_done(m_db, m_name, statement);
}

std::vector<std::optional<PartitionProgress>>
SqliteReorderTables::load_partitions(std::string_view scope,
                                     const std::vector<std::string>& partitions) {
    std::vector<std::optional<PartitionProgress>> found(partitions.size());
    auto* statement = m_find_partition.get();
    for (std::size_t i = 0; i < partitions.size(); ++i) {
        sqlite3_reset(statement);
        bind_text(statement, 1, scope);
        bind_blob(statement, 2, partitions[i]);
        int result = sqlite3_step(statement);
        if (result == SQLITE_ROW) {
            auto& progress = found[i].emplace();
            progress.partition = partitions[i];
            progress.started = sqlite3_column_int(statement, 0) != 0;
            progress.next = key_of(statement, 1);
            progress.highest = key_of(statement, 3);
        } else if (result != SQLITE_DONE) {
            sqlite3_reset(statement);
            throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
        }
    }
    sqlite3_reset(statement);
    return found;
}

std::vector<HeldRecordRow> SqliteReorderTables::load_held(std::string_view scope) {
    std::vector<HeldRecordRow> rows;
    auto* statement = m_load_held.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, scope);
    int result = SQLITE_ROW;
    while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
        auto& row = rows.emplace_back();
        row.id = static_cast<std::uint64_t>(sqlite3_column_int64(statement, 0));
        row.partition = column_bytes(statement, 1);
        row.key = key_of(statement, 2);
        row.arrival = Timestamp(Duration(sqlite3_column_int64(statement, 4)));
        row.bytes = column_bytes(statement, 5);
    }
    sqlite3_reset(statement);
    if (result != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
    return rows;
}

void SqliteReorderTables::save(std::string_view scope, const ReorderChanges& changes) {
    auto* partition = m_save_partition.get();
    for (const auto& progress : changes.progress) {
        bind_text(partition, 1, scope);
        bind_blob(partition, 2, progress.partition);
        sqlite3_bind_int(partition, 3, progress.started ? 1 : 0);
        sqlite3_bind_int64(partition, 4, progress.next.primary);
        sqlite3_bind_int64(partition, 5, static_cast<sqlite3_int64>(progress.next.secondary));
        sqlite3_bind_int64(partition, 6, progress.highest.primary);
        sqlite3_bind_int64(partition, 7, static_cast<sqlite3_int64>(progress.highest.secondary));
        step_done(partition);
    }
    auto* held = m_save_held.get();
    for (const auto& row : changes.held) {
        bind_text(held, 1, scope);
        sqlite3_bind_int64(held, 2, static_cast<sqlite3_int64>(row.id));
        bind_blob(held, 3, row.partition);
        sqlite3_bind_int64(held, 4, row.key.primary);
        sqlite3_bind_int64(held, 5, static_cast<sqlite3_int64>(row.key.secondary));
        sqlite3_bind_int64(held, 6, row.arrival.time_since_epoch().count());
        bind_blob(held, 7, row.bytes);
        step_done(held);
    }
    auto* drop = m_drop_held.get();
    for (auto id : changes.released) {
        bind_text(drop, 1, scope);
        sqlite3_bind_int64(drop, 2, static_cast<sqlite3_int64>(id));
        step_done(drop);
    }
}

void SqliteReorderTables::clear(std::string_view scope) {
    for (const char* sql : {"DELETE FROM reorder_partitions WHERE scope = ?1",
                            "DELETE FROM reorder_held WHERE scope = ?1"}) {
        Statement statement(m_db, sql, m_name);
        bind_text(statement.get(), 1, scope);
        step_done(statement.get());
    }
}

} // namespace idem::store::detail
