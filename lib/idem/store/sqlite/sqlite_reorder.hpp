#pragma once
// Internal to the SQLite store: reorder's tables (schema v3), kept apart from
// the fingerprint log so each can be read on its own. The store owns the
// transaction; these statements run inside it.

#include "idem/store/sequencer_state.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace idem::store::detail {

class SqliteReorderTables {
public:
    SqliteReorderTables(sqlite3* db, const std::string& store_name);

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions);
    std::vector<HeldRecordRow> load_held(std::string_view scope);
    void save(std::string_view scope, const ReorderChanges& changes);
    void clear(std::string_view scope);

private:
    void step_done(sqlite3_stmt* statement);

    sqlite3* m_db;
    std::string m_name;
    Statement m_find_partition;
    Statement m_save_partition;
    Statement m_load_held;
    Statement m_save_held;
    Statement m_drop_held;
};

} // namespace idem::store::detail
