#include "idem/store/sqlite/sqlite_verdicts.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::store::detail {

SqliteVerdicts::SqliteVerdicts(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name),
      m_save(db,
             "INSERT OR REPLACE INTO verdicts(scope, source, line, valid, scheme, message_id, "
             "reason, checked_us) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
             store_name),
      m_all(db,
            "SELECT source, line, valid, scheme, message_id, reason, checked_us FROM verdicts "
            "WHERE scope = ?1 ORDER BY source, line",
            store_name) {}

void SqliteVerdicts::fail() {
    throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
}

void SqliteVerdicts::save(std::string_view scope, const std::vector<VerdictRecord>& verdicts) {
    auto* statement = m_save.get();
    for (const auto& verdict : verdicts) {
        sqlite3_reset(statement);
        bind_text(statement, 1, scope);
        bind_text(statement, 2, verdict.source);
        sqlite3_bind_int64(statement, 3, static_cast<sqlite3_int64>(verdict.line));
        sqlite3_bind_int(statement, 4, verdict.valid ? 1 : 0);
        bind_text(statement, 5, verdict.scheme);
        bind_text(statement, 6, verdict.message_id);
        bind_text(statement, 7, verdict.reason);
        sqlite3_bind_int64(statement, 8, verdict.checked_at.time_since_epoch().count());
        int result = sqlite3_step(statement);
        sqlite3_reset(statement);
        if (result != SQLITE_DONE) fail();
    }
}

void SqliteVerdicts::for_each(std::string_view scope,
                              const std::function<void(const VerdictRecord&)>& visit) {
    auto* statement = m_all.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, scope);
    int result = SQLITE_ROW;
    VerdictRecord verdict;
    while ((result = sqlite3_step(statement)) == SQLITE_ROW) {
        verdict.source = column_bytes(statement, 0);
        verdict.line = static_cast<std::uint64_t>(sqlite3_column_int64(statement, 1));
        verdict.valid = sqlite3_column_int(statement, 2) != 0;
        verdict.scheme = column_bytes(statement, 3);
        verdict.message_id = column_bytes(statement, 4);
        verdict.reason = column_bytes(statement, 5);
        verdict.checked_at = Timestamp(Duration(sqlite3_column_int64(statement, 6)));
        visit(verdict);
    }
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
}

} // namespace idem::store::detail
