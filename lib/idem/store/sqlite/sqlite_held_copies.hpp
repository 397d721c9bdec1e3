#pragma once
// Internal to the SQLite store: the copies `dedup --keep last -o FILE`
// holds (schema v7, table dedup_held). The store owns the transaction;
// these statements run inside it.

#include "idem/store/held_copies.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"

#include <string>
#include <vector>

namespace idem::store::detail {

class SqliteHeldCopies {
public:
    SqliteHeldCopies(sqlite3* db, const std::string& store_name);
    std::vector<HeldCopyRow> load(std::string_view name);
    void save(std::string_view name, const HeldCopyChanges& changes);
    void clear(std::string_view name);

private:
    [[noreturn]] void fail();
    void done(sqlite3_stmt* statement);

    sqlite3* m_db;
    std::string m_name;
    Statement m_load;
    Statement m_save;
    Statement m_drop;
    Statement m_clear;
};

} // namespace idem::store::detail
