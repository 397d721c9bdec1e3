#pragma once
// Internal to the SQLite store: dedup's fingerprint log (schema v2). Rows are
// appended by a thread of its own while the caller goes on (see
// serial_worker.hpp); the connection is used by one thread at a time, so the
// store drains the log before any other use of it. The store owns the
// transaction; these statements run inside it.

#include "idem/store/detail/fingerprint_table.hpp"
#include "idem/store/detail/serial_worker.hpp"
#include "idem/store/detail/sqlite_support.hpp"
#include "idem/store/fingerprints.hpp"

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::store::detail {

// Per scope: the fingerprint log's index, and the last row it has seen.
struct ScopeIndex {
    FingerprintTable table;
    sqlite3_int64 last_seq = 0; // written by the appender: read only after draining it
    bool looked = false;        // expired entries were reclaimed on the first look
    bool current = false;       // caught up within the open transaction
};

// A decided claim, owned, for the appender.
struct LogRow {
    FingerprintBytes fingerprint;
    int kind; // 1: first copy, 2: repeat
    sqlite3_int64 source;
    sqlite3_int64 event_time_us, expires_us, line;
};

class SqliteFingerprintLog {
public:
    SqliteFingerprintLog(sqlite3* db, const std::string& store_name);
    ~SqliteFingerprintLog();

    // Waits for the appender; rethrows its failure (StoreError).
    void drain() { m_appender.drain(); }

    // Applies what was appended since this process last looked: everything
    // on the first claim, then only other processes' rows.
    void catch_up(std::string_view scope, ScopeIndex& index);

    // Appends `rows` on the appender thread and then moves index.last_seq
    // past them. `index` must outlive the next drain().
    void append_later(std::string_view scope, std::vector<LogRow> rows, ScopeIndex& index);

    // Input names are stored once, in sources; ids are cached per run.
    sqlite3_int64 source_id(std::string_view path);
    const std::string& source_path(sqlite3_int64 id);

private:
    void append_rows(std::string_view scope, const std::vector<LogRow>& rows);
    static void bind_rows(sqlite3_stmt* statement, std::string_view scope,
                          const std::vector<LogRow>& rows, std::size_t first, std::size_t count);

    sqlite3* m_db;
    std::string m_name;
    Statement m_append;
    Statement m_append_many;
    Statement m_catch_up;
    Statement m_insert_source;
    Statement m_source_id;
    Statement m_source_path;
    std::unordered_map<std::string, sqlite3_int64> m_source_ids;
    std::string_view m_last_source_path; // a key of m_source_ids
    sqlite3_int64 m_last_source_id = 0;
    std::unordered_map<sqlite3_int64, std::string> m_source_paths;
    SerialWorker m_appender; // last: stopped first, while the statements it uses exist
};

} // namespace idem::store::detail
