#include "idem/store/detail/sqlite_fingerprints.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>

namespace idem::store::detail {

namespace {

// Rows per multi-row INSERT into the fingerprint log (7 parameters each).
constexpr std::size_t k_rows_per_insert = 64;

std::string many_rows_insert() {
    std::string sql = "INSERT INTO fingerprint_log(scope, fingerprint, kind, event_time_us, "
                      "expires_us, source, line) VALUES ";
    for (std::size_t i = 0; i < k_rows_per_insert; ++i)
        sql += i == 0 ? "(?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?)";
    return sql;
}

} // namespace

SqliteFingerprintLog::SqliteFingerprintLog(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name),
      m_append(db,
               "INSERT INTO fingerprint_log(scope, fingerprint, kind, event_time_us, expires_us, "
               "source, line) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
               store_name),
      m_append_many(db, many_rows_insert().c_str(), store_name),
      m_catch_up(db,
                 "SELECT seq, fingerprint, kind, event_time_us, expires_us, source, line FROM "
                 "fingerprint_log WHERE seq > ?1 AND scope = ?2 ORDER BY seq",
                 store_name),
      m_insert_source(db, "INSERT OR IGNORE INTO sources(path) VALUES(?1)", store_name),
      m_source_id(db, "SELECT id FROM sources WHERE path = ?1", store_name),
      m_source_path(db, "SELECT path FROM sources WHERE id = ?1", store_name) {}

SqliteFingerprintLog::~SqliteFingerprintLog() = default;

void SqliteFingerprintLog::append_later(std::string_view scope, std::vector<LogRow> rows,
                                        ScopeIndex& index) {
    m_appender.post([this, scope = std::string(scope), rows = std::move(rows), &index] {
        append_rows(scope, rows);
        index.last_seq = sqlite3_last_insert_rowid(m_db);
    });
}

// Applies what was appended since this process last looked: everything
// on the first claim, then only other processes' rows.
void SqliteFingerprintLog::catch_up(std::string_view scope, ScopeIndex& index) {
    auto* statement = m_catch_up.get();
    sqlite3_reset(statement);
    sqlite3_bind_int64(statement, 1, index.last_seq);
    sqlite3_bind_text(statement, 2, scope.data(), static_cast<int>(scope.size()), SQLITE_STATIC);
    int step;
    while ((step = sqlite3_step(statement)) == SQLITE_ROW) {
        index.last_seq = sqlite3_column_int64(statement, 0);
        FingerprintBytes fingerprint{};
        auto size = static_cast<std::size_t>(sqlite3_column_bytes(statement, 1));
        std::memcpy(fingerprint.data(), sqlite3_column_blob(statement, 1),
                    std::min(size, fingerprint.size()));
        if (sqlite3_column_int(statement, 2) == 1) {
            *index.table.find_or_insert(fingerprint).first = {
                Timestamp(Duration(sqlite3_column_int64(statement, 3))),
                Timestamp(Duration(sqlite3_column_int64(statement, 4))), 1,
                static_cast<std::uint32_t>(sqlite3_column_int64(statement, 5)),
                static_cast<std::uint64_t>(sqlite3_column_int64(statement, 6))};
        } else if (auto* entry = index.table.find_mutable(fingerprint)) {
            if (sqlite3_column_int(statement, 2) == 3)
                entry->expires_at = std::min(
                    entry->expires_at, Timestamp(Duration(sqlite3_column_int64(statement, 4))));
            else
                ++entry->seen_count;
        }
    }
    sqlite3_reset(statement);
    if (step != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
}

// Appends the decided rows: k_rows_per_insert at a time through one
// multi-row INSERT (a statement step per row was most of the cost), the
// rest one by one.
void SqliteFingerprintLog::append_rows(std::string_view scope, const std::vector<LogRow>& rows) {
    std::size_t done = 0;
    while (rows.size() - done >= k_rows_per_insert) {
        bind_rows(m_append_many.get(), scope, rows, done, k_rows_per_insert);
        step_done(m_db, m_name, m_append_many.get());
        done += k_rows_per_insert;
    }
    for (; done < rows.size(); ++done) {
        bind_rows(m_append.get(), scope, rows, done, 1);
        step_done(m_db, m_name, m_append.get());
    }
}

void SqliteFingerprintLog::bind_rows(sqlite3_stmt* statement, std::string_view scope,
                                     const std::vector<LogRow>& rows, std::size_t first,
                                     std::size_t count) {
    sqlite3_reset(statement);
    for (std::size_t i = 0; i < count; ++i) {
        const auto& row = rows[first + i];
        int base = static_cast<int>(i * 7);
        sqlite3_bind_text(statement, base + 1, scope.data(), static_cast<int>(scope.size()),
                          SQLITE_STATIC);
        sqlite3_bind_blob(statement, base + 2, row.fingerprint.data(),
                          static_cast<int>(row.fingerprint.size()), SQLITE_STATIC);
        sqlite3_bind_int(statement, base + 3, row.kind);
        sqlite3_bind_int64(statement, base + 4, row.event_time_us);
        sqlite3_bind_int64(statement, base + 5, row.expires_us);
        sqlite3_bind_int64(statement, base + 6, row.source);
        sqlite3_bind_int64(statement, base + 7, row.line);
    }
}

sqlite3_int64 SqliteFingerprintLog::source_id(std::string_view path) {
    // Claims come file by file: the last answer is nearly always the one.
    if (m_last_source_id && m_last_source_path == path) return m_last_source_id;
    auto found = m_source_ids.find(std::string(path));
    if (found != m_source_ids.end()) {
        m_last_source_path = found->first;
        return m_last_source_id = found->second;
    }
    m_appender.drain(); // the connection is the appender's while it works
    for (auto* statement : {m_insert_source.get(), m_source_id.get()}) {
        sqlite3_reset(statement);
        sqlite3_bind_text(statement, 1, path.data(), static_cast<int>(path.size()), SQLITE_STATIC);
    }
    step_done(m_db, m_name, m_insert_source.get());
    auto* lookup = m_source_id.get();
    if (sqlite3_step(lookup) != SQLITE_ROW)
        throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
    auto id = sqlite3_column_int64(lookup, 0);
    sqlite3_reset(lookup);
    m_last_source_path = m_source_ids.emplace(std::string(path), id).first->first;
    return m_last_source_id = id;
}

const std::string& SqliteFingerprintLog::source_path(sqlite3_int64 id) {
    auto found = m_source_paths.find(id);
    if (found != m_source_paths.end()) return found->second;
    m_appender.drain(); // the connection is the appender's while it works
    auto* lookup = m_source_path.get();
    sqlite3_reset(lookup);
    sqlite3_bind_int64(lookup, 1, id);
    std::string path = sqlite3_step(lookup) == SQLITE_ROW
                           ? reinterpret_cast<const char*>(sqlite3_column_text(lookup, 0))
                           : std::string("?");
    sqlite3_reset(lookup);
    return m_source_paths.emplace(id, std::move(path)).first->second;
}

} // namespace idem::store::detail
