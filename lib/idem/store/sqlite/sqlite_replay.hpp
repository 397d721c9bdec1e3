#pragma once
// Internal to the SQLite store: replay's ledger (schema v4). The store owns
// the transaction (BEGIN IMMEDIATE: other processes wait, so a claim is
// atomic); these statements run inside it.

#include "idem/store/replay_ledger.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace idem::store::detail {

class SqliteReplayLedger {
public:
    SqliteReplayLedger(sqlite3* db, const std::string& store_name);

    std::vector<ReplayClaim> claim(std::string_view scope, const std::vector<std::string>& keys,
                                   std::string_view owner, Timestamp now, Timestamp lease_until,
                                   ReplayRerun rerun);
    void renew(std::string_view scope, const std::vector<std::string>& keys, std::string_view owner,
               Timestamp lease_until);
    void save(std::string_view scope, const std::vector<ReplayEntry>& entries);
    void for_each(std::string_view scope, const std::function<void(const ReplayEntry&)>& visit);

private:
    std::optional<ReplayEntry> find(std::string_view scope, std::string_view key);
    void save_one(std::string_view scope, const ReplayEntry& entry);
    [[noreturn]] void fail();

    sqlite3* m_db;
    std::string m_name;
    Statement m_find;
    Statement m_save;
    Statement m_renew;
    Statement m_all;
};

} // namespace idem::store::detail
