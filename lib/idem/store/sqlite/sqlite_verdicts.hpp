#pragma once
// Internal to the SQLite store: verify's verdicts (schema v5), kept by
// `verify --keep-verdicts` for `audit --verdicts`. The store owns the
// transaction; these statements run inside it.

#include "idem/store/sqlite/sqlite_support.hpp"
#include "idem/store/verdicts.hpp"

#include <functional>
#include <string>
#include <vector>

namespace idem::store::detail {

class SqliteVerdicts {
public:
    SqliteVerdicts(sqlite3* db, const std::string& store_name);
    void save(std::string_view scope, const std::vector<VerdictRecord>& verdicts);
    void for_each(std::string_view scope, const std::function<void(const VerdictRecord&)>& visit);

private:
    [[noreturn]] void fail();

    sqlite3* m_db;
    std::string m_name;
    Statement m_save;
    Statement m_all;
};

} // namespace idem::store::detail
