#include "idem/store/sqlite/sqlite_open_windows.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::store::detail {

SqliteOpenWindows::SqliteOpenWindows(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name),
      m_load(db, "SELECT key, state FROM merge_windows WHERE name = ?1", store_name),
      m_save(db, "INSERT OR REPLACE INTO merge_windows(name, key, state) VALUES(?1, ?2, ?3)",
             store_name),
      m_drop(db, "DELETE FROM merge_windows WHERE name = ?1 AND key = ?2", store_name),
      m_clear(db, "DELETE FROM merge_windows WHERE name = ?1", store_name) {}

void SqliteOpenWindows::fail() {
    throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
}

std::vector<std::pair<std::string, std::string>> SqliteOpenWindows::load(std::string_view name,
                                                                         std::string& meta) {
    auto* statement = m_load.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, name);
    std::vector<std::pair<std::string, std::string>> windows;
    meta.clear();
    int result = SQLITE_ROW;
    while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
        auto key = column_bytes(statement, 0);
        auto state = column_bytes(statement, 1);
        if (key.empty())
            meta = std::move(state);
        else
            windows.emplace_back(std::move(key), std::move(state));
    }
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
    return windows;
}

void SqliteOpenWindows::put(std::string_view name, std::string_view key, std::string_view state) {
    auto* statement = m_save.get();
    bind_text(statement, 1, name);
    bind_blob(statement, 2, key);
    bind_blob(statement, 3, state);
    int result = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
}

void SqliteOpenWindows::save(std::string_view name, const WindowChanges& changes) {
    for (const auto& [key, state] : changes.saved)
        put(name, key, state);
    for (const auto& key : changes.removed) {
        auto* statement = m_drop.get();
        bind_text(statement, 1, name);
        bind_blob(statement, 2, key);
        int result = sqlite3_step(statement);
        sqlite3_reset(statement);
        if (result != SQLITE_DONE) fail();
    }
    put(name, "", changes.meta);
}

void SqliteOpenWindows::clear(std::string_view name) {
    auto* statement = m_clear.get();
    bind_text(statement, 1, name);
    int result = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
}

} // namespace idem::store::detail
