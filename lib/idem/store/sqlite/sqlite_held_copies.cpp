#include "idem/store/sqlite/sqlite_held_copies.hpp"

#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::store::detail {

SqliteHeldCopies::SqliteHeldCopies(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name),
      m_load(db,
             "SELECT id, fingerprint_hex, source, line, event_time_us, record FROM dedup_held "
             "WHERE name = ?1 ORDER BY id",
             store_name),
      m_save(db,
             "INSERT OR REPLACE INTO dedup_held(name, id, fingerprint_hex, source, line, "
             "event_time_us, record) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
             store_name),
      m_drop(db, "DELETE FROM dedup_held WHERE name = ?1 AND id = ?2", store_name),
      m_clear(db, "DELETE FROM dedup_held WHERE name = ?1", store_name) {}

void SqliteHeldCopies::fail() {
    throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
}

void SqliteHeldCopies::done(sqlite3_stmt* statement) {
    int result = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
}

std::vector<HeldCopyRow> SqliteHeldCopies::load(std::string_view name) {
    auto* statement = m_load.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, name);
    std::vector<HeldCopyRow> rows;
    int result = SQLITE_ROW;
    while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
        auto& row = rows.emplace_back();
        row.id = static_cast<std::uint64_t>(sqlite3_column_int64(statement, 0));
        auto fingerprint = column_bytes(statement, 1);
        if (hex_decode_to(fingerprint, reinterpret_cast<char*>(row.fingerprint.data()),
                          row.fingerprint.size()) != row.fingerprint.size()) {
            sqlite3_reset(statement);
            throw StoreError(fmt::format(
                "store {}: a copy held by dedup --keep last is unreadable (fingerprint {})",
                quote(m_name), quote(fingerprint)));
        }
        row.source = column_bytes(statement, 2);
        row.line = static_cast<std::uint64_t>(sqlite3_column_int64(statement, 3));
        row.event_time = Timestamp(Duration(sqlite3_column_int64(statement, 4)));
        row.bytes = column_bytes(statement, 5);
    }
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
    return rows;
}

void SqliteHeldCopies::save(std::string_view name, const HeldCopyChanges& changes) {
    for (const auto& row : changes.held) {
        auto* statement = m_save.get();
        auto fingerprint = hex_encode(std::string_view(
            reinterpret_cast<const char*>(row.fingerprint.data()), row.fingerprint.size()));
        bind_text(statement, 1, name);
        sqlite3_bind_int64(statement, 2, static_cast<sqlite3_int64>(row.id));
        bind_text(statement, 3, fingerprint);
        bind_text(statement, 4, row.source);
        sqlite3_bind_int64(statement, 5, static_cast<sqlite3_int64>(row.line));
        sqlite3_bind_int64(statement, 6, row.event_time.time_since_epoch().count());
        bind_blob(statement, 7, row.bytes);
        done(statement);
    }
    for (auto id : changes.released) {
        auto* statement = m_drop.get();
        bind_text(statement, 1, name);
        sqlite3_bind_int64(statement, 2, static_cast<sqlite3_int64>(id));
        done(statement);
    }
}

void SqliteHeldCopies::clear(std::string_view name) {
    auto* statement = m_clear.get();
    bind_text(statement, 1, name);
    done(statement);
}

} // namespace idem::store::detail
