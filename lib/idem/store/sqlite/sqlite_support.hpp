#pragma once
// Internal to the SQLite store: its schema, and a prepared statement that
// finalizes itself.

#include "idem/record/key.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <initializer_list>
#include <memory>
#include <sqlite3.h>
#include <string>

namespace idem::store::detail {

using record::FingerprintBytes;

// Forward-only migrations; the index is the schema version they produce.
inline constexpr const char* k_migrations[] = {
    "",
    // v1: nonces seen by `verify --nonce`, per scheme.
    "CREATE TABLE nonces ("
    "  scope TEXT NOT NULL,"
    "  nonce TEXT NOT NULL,"
    "  first_seen_us INTEGER NOT NULL,"
    "  expires_us INTEGER NOT NULL,"
    "  PRIMARY KEY (scope, nonce)"
    ") WITHOUT ROWID;",
    // v2: dedup. Fingerprints are an append-only log: a claim appends a row
    // (a first copy, or a repeat kept as evidence of its first copy, for
    // `audit`), and each process keeps the log's index in memory, catching
    // up on what others appended. Input names are stored once, in sources.
    "CREATE TABLE sources (id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE);"
    "CREATE TABLE fingerprint_log ("
    "  seq INTEGER PRIMARY KEY,"
    "  scope TEXT NOT NULL,"
    "  fingerprint BLOB NOT NULL,"
    "  kind INTEGER NOT NULL," // 1: first copy, 2: repeat, 3: released (store::release_fingerprint)
    "  event_time_us INTEGER NOT NULL,"
    "  expires_us INTEGER NOT NULL,"
    "  source INTEGER NOT NULL REFERENCES sources(id),"
    "  line INTEGER NOT NULL"
    ");"
    // How far a run that owns its output files got (see Checkpoint).
    "CREATE TABLE checkpoints ("
    "  name TEXT PRIMARY KEY,"
    "  records_done INTEGER NOT NULL,"
    "  file_bytes TEXT NOT NULL" // "output=123,dups=45"
    ");",
    // v3: reorder. Per scope and partition (its encoded key), where the
    // partition stands; and the records held for a later run (--hold) or
    // until the run's next commit. Columns per order::PartitionProgress and
    // order::HeldRecordRow.
    "CREATE TABLE reorder_partitions ("
    "  scope TEXT NOT NULL,"
    "  partition BLOB NOT NULL,"
    "  started INTEGER NOT NULL,"
    "  next_primary INTEGER NOT NULL,"
    "  next_secondary INTEGER NOT NULL,"
    "  highest_primary INTEGER NOT NULL,"
    "  highest_secondary INTEGER NOT NULL,"
    "  PRIMARY KEY (scope, partition)"
    ") WITHOUT ROWID;"
    "CREATE TABLE reorder_held ("
    "  scope TEXT NOT NULL,"
    "  id INTEGER NOT NULL,"
    "  partition BLOB NOT NULL,"
    "  key_primary INTEGER NOT NULL,"
    "  key_secondary INTEGER NOT NULL,"
    "  arrival_us INTEGER NOT NULL,"
    "  record BLOB NOT NULL,"
    "  PRIMARY KEY (scope, id)"
    ");",
    // v4: replay's ledger, one row per scope and idempotency key; columns
    // per store::ReplayEntry (state 0 in progress, 1 completed, 2 failed).
    "CREATE TABLE replay_ledger ("
    "  scope TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  state INTEGER NOT NULL,"
    "  owner TEXT NOT NULL,"
    "  lease_until_us INTEGER NOT NULL,"
    "  attempts INTEGER NOT NULL,"
    "  status INTEGER NOT NULL,"
    "  latency_ms INTEGER NOT NULL,"
    "  permanent INTEGER NOT NULL,"
    "  error TEXT NOT NULL,"
    "  response_digest TEXT NOT NULL,"
    "  response_head BLOB NOT NULL,"
    "  updated_us INTEGER NOT NULL,"
    "  PRIMARY KEY (scope, key)"
    ") WITHOUT ROWID;",
    // v5: verify's verdicts (`verify --keep-verdicts`), one row per record
    // it read, by where the record was; a rerun replaces them.
    "CREATE TABLE verdicts ("
    "  scope TEXT NOT NULL,"
    "  source TEXT NOT NULL,"
    "  line INTEGER NOT NULL,"
    "  valid INTEGER NOT NULL,"
    "  scheme TEXT NOT NULL,"
    "  message_id TEXT NOT NULL,"
    "  reason TEXT NOT NULL,"
    "  checked_us INTEGER NOT NULL,"
    "  PRIMARY KEY (scope, source, line)"
    ") WITHOUT ROWID;",
    // v6: a nonce keeps which record it was, so that a record is never a
    // replay of itself; first_seen_us is its received_at (event time) and
    // expires_us when the wall clock lets the row go.
    "ALTER TABLE nonces ADD COLUMN source TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE nonces ADD COLUMN line INTEGER NOT NULL DEFAULT 0;",
    // v7: the copies `dedup --keep last -o FILE` holds get a table of their
    // own (store::HeldCopyRow), keyed by the run's checkpoint name. Before,
    // they sat in reorder_held under the scope "dedup held <name>", with
    // "<hex fingerprint> <source>" in the partition column and the line in
    // key_secondary: moved here, so a run killed under v6 resumes under v7.
    "CREATE TABLE dedup_held ("
    "  name TEXT NOT NULL,"
    "  id INTEGER NOT NULL,"
    "  fingerprint_hex TEXT NOT NULL,"
    "  source TEXT NOT NULL,"
    "  line INTEGER NOT NULL,"
    "  event_time_us INTEGER NOT NULL,"
    "  record BLOB NOT NULL,"
    "  PRIMARY KEY (name, id)"
    ");"
    "INSERT INTO dedup_held(name, id, fingerprint_hex, source, line, event_time_us, record) "
    "  SELECT substr(scope, 12), id, CAST(substr(partition, 1, 32) AS TEXT),"
    "         CAST(substr(partition, 34) AS TEXT), key_secondary, arrival_us, record"
    "  FROM reorder_held WHERE scope LIKE 'dedup held %';"
    "DELETE FROM reorder_held WHERE scope LIKE 'dedup held %';",
    // v8: the windows `merge -o FILE` has open at a commit, by the run's
    // checkpoint name; an opaque key and state per window (the empty key
    // holds the run's watermark and counters).
    "CREATE TABLE merge_windows ("
    "  name TEXT NOT NULL,"
    "  key BLOB NOT NULL,"
    "  state BLOB NOT NULL,"
    "  PRIMARY KEY (name, key)"
    ");",
    // v9: `states`: each entity's last state and version, per scope (the
    // state encoded by states/).
    "CREATE TABLE state_entities ("
    "  scope TEXT NOT NULL,"
    "  entity BLOB NOT NULL,"
    "  state BLOB NOT NULL,"
    "  PRIMARY KEY (scope, entity)"
    ") WITHOUT ROWID;",
    // v10: dedup's log no longer needs a whole pass to open. A first copy's
    // row (with its line in fingerprint_repeats once copies came after it:
    // how many, and where the latest came from) is its fingerprint's
    // state; a repeat's row, kept as evidence (at most k_kept_repeats per
    // first copy), names its first copy's row in `first_seq` and has no
    // scope or fingerprint of its own; a release (kind 3) lowers the first
    // copy's expires_us in place. Rows get their seq from the store (never
    // reused: store_meta keeps the highest one garbage collection took
    // away), and a process saves its index of the log in fingerprint_index
    // so the next one loads it and reads only the rows after it. Older rows
    // migrate here: each repeat is linked to the first copy before it, each
    // first copy gets its count and last place, and releases are applied.
    // A first copy replaced by a later one (its TTL or window ran out)
    // carries the later one's expiry, so a fingerprint's rows expire, and
    // are collected, together.
    "ALTER TABLE fingerprint_log ADD COLUMN first_seq INTEGER;"
    "CREATE TABLE fingerprint_repeats ("
    "  seq INTEGER PRIMARY KEY," // the first copy's row
    "  repeats INTEGER NOT NULL,"
    "  last_source INTEGER NOT NULL,"
    "  last_line INTEGER NOT NULL,"
    "  last_time_us INTEGER NOT NULL"
    ");"
    "CREATE TEMP TABLE fingerprint_heads AS"
    "  SELECT seq, kind, expires_us, source, line, event_time_us,"
    "         max(CASE WHEN kind = 1 THEN seq END)"
    "           OVER (PARTITION BY scope, fingerprint ORDER BY seq) AS head"
    "  FROM fingerprint_log;"
    "UPDATE fingerprint_log SET first_seq = heads.head FROM temp.fingerprint_heads AS heads"
    "  WHERE heads.seq = fingerprint_log.seq AND heads.kind = 2;"
    "INSERT INTO fingerprint_repeats(seq, repeats, last_source, last_line, last_time_us)"
    "  SELECT counted.head, counted.copies, last.source, last.line, last.event_time_us"
    "  FROM (SELECT head, count(*) AS copies, max(seq) AS last_seq FROM temp.fingerprint_heads"
    "        WHERE kind = 2 AND head IS NOT NULL GROUP BY head) AS counted"
    "  JOIN temp.fingerprint_heads AS last ON last.seq = counted.last_seq;"
    "UPDATE fingerprint_log SET expires_us = min(fingerprint_log.expires_us, released.until)"
    "  FROM (SELECT head, min(expires_us) AS until FROM temp.fingerprint_heads"
    "        WHERE kind = 3 AND head IS NOT NULL GROUP BY head) AS released"
    "  WHERE fingerprint_log.seq = released.head;"
    "UPDATE fingerprint_log SET expires_us = latest.until"
    "  FROM (SELECT scope, fingerprint, max(expires_us) AS until, max(seq) AS last_seq"
    "        FROM fingerprint_log WHERE kind = 1 GROUP BY scope, fingerprint"
    "        HAVING count(*) > 1) AS latest"
    "  WHERE fingerprint_log.kind = 1 AND fingerprint_log.scope = latest.scope"
    "    AND fingerprint_log.fingerprint = latest.fingerprint"
    "    AND fingerprint_log.seq < latest.last_seq;"
    "DELETE FROM fingerprint_log WHERE kind = 3 OR (kind = 2 AND first_seq IS NULL);"
    "DROP TABLE temp.fingerprint_heads;"
    "CREATE TABLE fingerprint_index ("
    "  scope TEXT NOT NULL,"
    "  part INTEGER NOT NULL,"
    "  covers_seq INTEGER NOT NULL," // every row of the scope up to here is in it
    "  gc_generation INTEGER NOT NULL,"
    "  capacity INTEGER NOT NULL,"
    "  entries INTEGER NOT NULL,"
    "  base INTEGER NOT NULL,"
    "  slots BLOB NOT NULL,"
    "  PRIMARY KEY (scope, part)"
    ");"
    "CREATE TABLE store_meta (name TEXT PRIMARY KEY, value INTEGER NOT NULL);",
    // v11: while the saved index's changes since it was saved whole are
    // fewer than a quarter of it, a process saves only what it changed: each slot it put, with the
    // one it replaced (16 bytes a change, in seq order), applying to the
    // saved index (and deltas) covering the rows up to after_seq. The next
    // process replays them instead of reading those rows of the log; once
    // the deltas would hold more, the index is saved whole and the deltas it
    // covers go.
    "CREATE TABLE fingerprint_index_delta ("
    "  scope TEXT NOT NULL,"
    "  after_seq INTEGER NOT NULL,"
    "  covers_seq INTEGER NOT NULL,"
    "  gc_generation INTEGER NOT NULL,"
    "  base INTEGER NOT NULL,"
    "  changes BLOB NOT NULL,"
    "  PRIMARY KEY (scope, after_seq, covers_seq)"
    ");",
    // v12: the index saved whole moves out of the store, into a file beside
    // it (<store>-index-<token>, saved_slots_file.hpp) that the next process
    // maps instead of copying into memory; the row names the file by its
    // token. A v11 store's saved index and deltas go: its next process
    // reads the log once and saves the file.
    "DELETE FROM fingerprint_index_delta;"
    "DROP TABLE fingerprint_index;"
    "CREATE TABLE fingerprint_index ("
    "  scope TEXT PRIMARY KEY,"
    "  covers_seq INTEGER NOT NULL," // every row of the scope up to here is in it
    "  gc_generation INTEGER NOT NULL,"
    "  capacity INTEGER NOT NULL,"
    "  entries INTEGER NOT NULL,"
    "  base INTEGER NOT NULL,"
    "  token INTEGER NOT NULL" // names the file, as 16 hex digits
    ");",
};
inline constexpr int k_schema_version = 12;

// SQLite's memory statistics take a global mutex on every allocation; idem
// reads none of them. Must run before SQLite initialises, so once, first.
inline void disable_memory_statistics() {
    static const bool k_done = [] {
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
        return true;
    }();
    (void)k_done;
}

// A fingerprint column (a 16-byte blob; shorter or NULL reads as zeros
// past what it has).
inline FingerprintBytes fingerprint_column(sqlite3_stmt* statement, int column) {
    FingerprintBytes fingerprint{};
    auto size = static_cast<std::size_t>(sqlite3_column_bytes(statement, column));
    if (const auto* bytes = sqlite3_column_blob(statement, column))
        std::memcpy(fingerprint.data(), bytes, std::min(size, fingerprint.size()));
    return fingerprint;
}

// Bound for the statement's next step only (SQLITE_STATIC): an empty text or
// blob is bound as empty, not NULL, as the columns are NOT NULL.
inline void bind_text(sqlite3_stmt* statement, int index, std::string_view text) {
    sqlite3_bind_text(statement, index, text.empty() ? "" : text.data(),
                      static_cast<int>(text.size()), SQLITE_STATIC);
}

inline void bind_blob(sqlite3_stmt* statement, int index, std::string_view bytes) {
    sqlite3_bind_blob(statement, index, bytes.empty() ? "" : bytes.data(),
                      static_cast<int>(bytes.size()), SQLITE_STATIC);
}

// A text or blob column's bytes, copied.
inline std::string column_bytes(sqlite3_stmt* statement, int column) {
    const auto* data = static_cast<const char*>(sqlite3_column_blob(statement, column));
    auto size = sqlite3_column_bytes(statement, column);
    return data ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

// Steps `statement` once: true for a row, false when it is done. Anything
// else (a busy or corrupt file, an I/O error, an error in the query)
// throws StoreError naming the store, and resets the statement: a failed
// read never reads as "not found" (for a nonce, "never seen" would let a
// replay through).
inline bool step_row(sqlite3_stmt* statement, const std::string& store_name) {
    int result = sqlite3_step(statement);
    if (result == SQLITE_ROW) return true;
    if (result == SQLITE_DONE) return false;
    std::string message = sqlite3_errmsg(sqlite3_db_handle(statement));
    sqlite3_reset(statement);
    throw StoreError(fmt::format("store {}: {}", quote(store_name), message));
}

// Steps a statement whose rows, if any, are not read, and resets it;
// throws StoreError naming the store when SQLite failed.
inline void step_done(sqlite3* db, const std::string& store_name, sqlite3_stmt* statement) {
    int result = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (result != SQLITE_DONE && result != SQLITE_ROW)
        throw StoreError(fmt::format("store {}: {}", quote(store_name), sqlite3_errmsg(db)));
}

// Runs SQL that returns no rows; throws StoreError naming the store and the SQL.
inline void execute(sqlite3* db, const std::string& store_name, const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
        std::string message = error ? error : "unknown error";
        sqlite3_free(error);
        throw StoreError(fmt::format("store {}: {} (during {})", quote(store_name), message, sql));
    }
}

// One owner for each SQLite handle: closed when it goes, a throw included.
struct SqliteCloser {
    void operator()(sqlite3* db) const { sqlite3_close(db); }
    void operator()(sqlite3_blob* blob) const { sqlite3_blob_close(blob); }
};
using UniqueSqlite = std::unique_ptr<sqlite3, SqliteCloser>;
using UniqueBlob = std::unique_ptr<sqlite3_blob, SqliteCloser>;

// Opens the store's file with `flags`; throws StoreError naming it.
inline UniqueSqlite open_connection(const std::string& path, int flags) {
    sqlite3* db = nullptr;
    int opened = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
    UniqueSqlite connection(db); // a handle comes back even when the open fails
    if (opened != SQLITE_OK)
        throw StoreError(fmt::format("cannot open store {}: {}", quote(path),
                                     db ? sqlite3_errmsg(db) : "out of memory"));
    return connection;
}

// The blob at `row` of `table`.`column`, read-only; null when SQLite
// cannot open it.
inline UniqueBlob open_blob(sqlite3* db, const char* table, const char* column, sqlite3_int64 row) {
    sqlite3_blob* blob = nullptr;
    int opened = sqlite3_blob_open(db, "main", table, column, row, 0, &blob);
    UniqueBlob owned(blob); // SQLite may hand a handle back even when it fails
    if (opened != SQLITE_OK) owned.reset();
    return owned;
}

class Statement {
public:
    Statement(sqlite3* db, const char* sql, const std::string& store_name) {
        if (sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &m_statement, nullptr) !=
            SQLITE_OK)
            throw StoreError(fmt::format("store {}: {}", quote(store_name), sqlite3_errmsg(db)));
    }
    ~Statement() { sqlite3_finalize(m_statement); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;
    sqlite3_stmt* get() { return m_statement; }

private:
    sqlite3_stmt* m_statement = nullptr;
};

// One integer a query answers (0 when it answers nothing), its parameters
// numbered ?1, ?2… in the order given.
inline sqlite3_int64 query_integer(sqlite3* db, const std::string& store_name, const char* sql,
                                   std::initializer_list<sqlite3_int64> numbers = {}) {
    Statement statement(db, sql, store_name);
    int index = 0;
    for (auto number : numbers)
        sqlite3_bind_int64(statement.get(), ++index, number);
    int step = sqlite3_step(statement.get());
    if (step == SQLITE_ROW) return sqlite3_column_int64(statement.get(), 0);
    if (step != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(store_name), sqlite3_errmsg(db)));
    return 0;
}

} // namespace idem::store::detail
