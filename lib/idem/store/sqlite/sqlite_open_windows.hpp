#pragma once
// Internal to the SQLite store: merge's open windows (schema v8, table
// merge_windows; the meta is the row whose key is empty). The store owns
// the transaction; these statements run inside it.

#include "idem/store/open_windows.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"

#include <string>
#include <vector>

namespace idem::store::detail {

class SqliteOpenWindows {
public:
    SqliteOpenWindows(sqlite3* db, const std::string& store_name);
    std::vector<std::pair<std::string, std::string>> load(std::string_view name, std::string& meta);
    void save(std::string_view name, const WindowChanges& changes);
    void clear(std::string_view name);

private:
    [[noreturn]] void fail();
    void put(std::string_view name, std::string_view key, std::string_view state);

    sqlite3* m_db;
    std::string m_name;
    Statement m_load;
    Statement m_save;
    Statement m_drop;
    Statement m_clear;
};

} // namespace idem::store::detail
