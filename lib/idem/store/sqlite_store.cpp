#include "idem/store/detail/fingerprint_table.hpp"
#include "idem/store/detail/serial_worker.hpp"
#include "idem/store/detail/sqlite_evidence.hpp"
#include "idem/store/detail/sqlite_reorder.hpp"
#include "idem/store/detail/sqlite_replay.hpp"
#include "idem/store/detail/sqlite_support.hpp"
#include "idem/store/store.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <sqlite3.h>
#include <unordered_map>

namespace idem::store {

std::unique_ptr<Store> open_redis_store(const StoreLocation& location);
std::unique_ptr<Store> open_memory_store();

namespace {

using detail::disable_memory_statistics;
using detail::k_migrations;
using detail::k_schema_version;
using detail::Statement;

// Rows per multi-row INSERT into the fingerprint log (7 parameters each).
constexpr std::size_t k_rows_per_insert = 64;

// Claims are committed in batches: one fsync per batch, not per record.
constexpr int k_claims_per_transaction = 4096;

// Per scope: the fingerprint log's index, and the last row it has seen.
struct ScopeIndex {
    detail::FingerprintTable table;
    sqlite3_int64 last_seq = 0; // written by the appender: read only after draining it
    bool looked = false;        // expired entries were reclaimed on the first look
    bool current = false;       // caught up within the open transaction
};

class SqliteStore final : public Store {
    // A decided claim, owned, for the appender.
    struct Row {
        FingerprintBytes fingerprint;
        int kind; // 1: first copy, 2: repeat
        sqlite3_int64 source;
        sqlite3_int64 event_time_us, expires_us, line;
    };

public:
    explicit SqliteStore(const StoreLocation& location)
        : m_name(location.kind == StoreKind::memory ? ":memory:" : location.path) {
        disable_memory_statistics();
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
        if (sqlite3_open_v2(m_name.c_str(), &m_db, flags, nullptr) != SQLITE_OK) {
            std::string message = m_db ? sqlite3_errmsg(m_db) : "out of memory";
            sqlite3_close(m_db);
            m_db = nullptr;
            throw StoreError(fmt::format("cannot open store {}: {}", quote(m_name), message));
        }
        // A constructor that throws runs no destructor: close what is open.
        try {
            prepare(location);
        } catch (...) {
            close();
            throw;
        }
    }

    void prepare(const StoreLocation& location) {
        // Processes sharing the file take turns batch by batch; a turn lasts as
        // long as writing one batch of output takes.
        sqlite3_busy_timeout(
            m_db, static_cast<int>(
                      std::chrono::duration_cast<std::chrono::milliseconds>(location.lock_timeout)
                          .count()));
        execute("PRAGMA journal_mode=WAL");
        execute("PRAGMA synchronous=NORMAL");
        // Claims touch random pages of a large B-tree: a big page cache keeps
        // them in memory between batches (measured in PERF-NOTES: 3x).
        execute(fmt::format("PRAGMA cache_size=-{}", location.cache_bytes >> 10).c_str());
        migrate();
        m_claim = std::make_unique<Statement>(
            m_db,
            "INSERT INTO nonces(scope, nonce, first_seen_us, expires_us) VALUES(?1, ?2, ?3, ?4) "
            "ON CONFLICT(scope, nonce) DO UPDATE SET first_seen_us = excluded.first_seen_us, "
            "expires_us = excluded.expires_us WHERE nonces.expires_us <= ?3",
            m_name);
        m_lookup = std::make_unique<Statement>(
            m_db, "SELECT first_seen_us FROM nonces WHERE scope = ?1 AND nonce = ?2", m_name);
        // ?7 is now, ?8 the window: an expired entry, or a first copy outside
        // the window, is replaced by this one; otherwise this is a repeat.
        m_append = std::make_unique<Statement>(m_db,
                                               "INSERT INTO fingerprint_log(scope, fingerprint, "
                                               "kind, event_time_us, expires_us, source, line) "
                                               "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                                               m_name);
        std::string many =
            "INSERT INTO fingerprint_log(scope, fingerprint, kind, event_time_us, expires_us, "
            "source, line) VALUES ";
        for (std::size_t i = 0; i < k_rows_per_insert; ++i)
            many += i == 0 ? "(?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?)";
        m_append_many = std::make_unique<Statement>(m_db, many.c_str(), m_name);
        m_catch_up = std::make_unique<Statement>(m_db,
                                                 "SELECT seq, fingerprint, kind, event_time_us, "
                                                 "expires_us, source, line FROM fingerprint_log "
                                                 "WHERE seq > ?1 AND scope = ?2 ORDER BY seq",
                                                 m_name);
        m_insert_source = std::make_unique<Statement>(
            m_db, "INSERT OR IGNORE INTO sources(path) VALUES(?1)", m_name);
        m_source_id =
            std::make_unique<Statement>(m_db, "SELECT id FROM sources WHERE path = ?1", m_name);
        m_source_path =
            std::make_unique<Statement>(m_db, "SELECT path FROM sources WHERE id = ?1", m_name);
        m_reorder = std::make_unique<detail::SqliteReorderTables>(m_db, m_name);
        m_replay = std::make_unique<detail::SqliteReplayLedger>(m_db, m_name);
    }

    ~SqliteStore() override { close(); }

    void close() {
        m_appender.reset(); // stops it; what it had not appended is rolled back below
        m_claim.reset();
        m_lookup.reset();
        m_append.reset();
        m_append_many.reset();
        m_catch_up.reset();
        m_insert_source.reset();
        m_source_id.reset();
        m_source_path.reset();
        m_reorder.reset();
        m_replay.reset();
        if (m_in_transaction) sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
        m_in_transaction = false;
        sqlite3_close(m_db);
        m_db = nullptr;
    }

    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce, Timestamp now,
                           Timestamp expires_at) override {
        m_appender->drain();
        begin_if_needed();
        auto* statement = m_claim->get();
        sqlite3_reset(statement);
        sqlite3_bind_text(statement, 1, scope.data(), static_cast<int>(scope.size()),
                          SQLITE_STATIC);
        sqlite3_bind_text(statement, 2, nonce.data(), static_cast<int>(nonce.size()),
                          SQLITE_STATIC);
        sqlite3_bind_int64(statement, 3, now.time_since_epoch().count());
        sqlite3_bind_int64(statement, 4, expires_at.time_since_epoch().count());
        step_done(statement);
        NonceClaim claim;
        claim.fresh = sqlite3_changes(m_db) == 1;
        if (!claim.fresh) {
            auto* lookup = m_lookup->get();
            sqlite3_reset(lookup);
            sqlite3_bind_text(lookup, 1, scope.data(), static_cast<int>(scope.size()),
                              SQLITE_STATIC);
            sqlite3_bind_text(lookup, 2, nonce.data(), static_cast<int>(nonce.size()),
                              SQLITE_STATIC);
            if (sqlite3_step(lookup) == SQLITE_ROW)
                claim.first_seen = Timestamp(Duration(sqlite3_column_int64(lookup, 0)));
            sqlite3_reset(lookup);
        }
        if (++m_pending >= k_claims_per_transaction) commit();
        return claim;
    }

    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp now) override {
        // The write lock is held from here to commit(): nobody else can
        // append between catching up and deciding, so within one
        // transaction the index needs catching up only once.
        auto& index = scope_index(scope);
        if (!m_in_transaction || !index.current) {
            m_appender->drain();
            begin_if_needed();
            catch_up(scope, index);
            index.current = true;
            if (!index.looked) reclaim_expired(index, now);
            index.looked = true;
        }
        std::vector<Row> rows;
        rows.reserve(claims.size());
        std::vector<FingerprintResult> results(claims.size());
        for (std::size_t i = 0; i < claims.size(); ++i) {
            const auto& claim = claims[i];
            auto source = source_id(claim.source);
            const auto& entry =
                detail::decide(index.table, claim, static_cast<std::uint32_t>(source), now);
            auto& result = results[i];
            result.seen_count = entry.seen_count;
            result.first = entry.seen_count == 1;
            result.first_seen = entry.first_seen;
            if (!result.first) {
                result.first_source = source_path(entry.first_source);
                result.first_line = entry.first_line;
            }
            rows.push_back({claim.fingerprint, result.first ? 1 : 2, source,
                            claim.event_time.time_since_epoch().count(),
                            claim.expires_at.time_since_epoch().count(),
                            static_cast<sqlite3_int64>(claim.line)});
        }
        if (rows.empty()) return results;
        // Appended by the appender while the caller writes its output; the
        // index already holds the decisions.
        m_appender->post([this, scope = std::string(scope), rows = std::move(rows), &index] {
            append_rows(scope, rows);
            index.last_seq = sqlite3_last_insert_rowid(m_db);
        });
        return results;
    }

    // A release is a row of its own (kind 3) so that every process's index
    // learns of it while catching up, as it learns of claims.
    void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                             Timestamp now) override {
        m_appender->drain();
        begin_if_needed();
        auto& index = scope_index(scope);
        catch_up(scope, index);
        Statement statement(m_db,
                            "INSERT INTO fingerprint_log(scope, fingerprint, kind, event_time_us, "
                            "expires_us, source, line) VALUES(?1, ?2, 3, ?3, ?3, ?4, 0)",
                            m_name);
        sqlite3_bind_text(statement.get(), 1, scope.data(), static_cast<int>(scope.size()),
                          SQLITE_STATIC);
        sqlite3_bind_blob(statement.get(), 2, fingerprint.data(),
                          static_cast<int>(fingerprint.size()), SQLITE_STATIC);
        sqlite3_bind_int64(statement.get(), 3, now.time_since_epoch().count());
        sqlite3_bind_int64(statement.get(), 4, source_id("(released)"));
        step_done(statement.get());
        index.last_seq = sqlite3_last_insert_rowid(m_db);
        if (auto* entry = index.table.find_mutable(fingerprint))
            entry->expires_at = std::min(entry->expires_at, now);
    }

    std::optional<Checkpoint> load_checkpoint(std::string_view name) override {
        m_appender->drain();
        Statement statement(
            m_db, "SELECT records_done, file_bytes FROM checkpoints WHERE name = ?1", m_name);
        sqlite3_bind_text(statement.get(), 1, name.data(), static_cast<int>(name.size()),
                          SQLITE_STATIC);
        if (sqlite3_step(statement.get()) != SQLITE_ROW) return std::nullopt;
        Checkpoint checkpoint;
        checkpoint.records_done =
            static_cast<std::uint64_t>(sqlite3_column_int64(statement.get(), 0));
        std::string_view files =
            reinterpret_cast<const char*>(sqlite3_column_text(statement.get(), 1));
        for (auto item : split(files, ',')) {
            auto equals = item.find('=');
            if (equals == std::string_view::npos) continue;
            std::uint64_t bytes = 0;
            std::from_chars(item.data() + equals + 1, item.data() + item.size(), bytes);
            checkpoint.file_bytes[std::string(item.substr(0, equals))] = bytes;
        }
        return checkpoint;
    }

    void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) override {
        m_appender->drain();
        begin_if_needed();
        std::string files;
        for (const auto& [role, bytes] : checkpoint.file_bytes)
            files += fmt::format("{}{}={}", files.empty() ? "" : ",", role, bytes);
        Statement statement(
            m_db,
            "INSERT INTO checkpoints(name, records_done, file_bytes) VALUES(?1, ?2, ?3) "
            "ON CONFLICT(name) DO UPDATE SET records_done = excluded.records_done, "
            "file_bytes = excluded.file_bytes",
            m_name);
        sqlite3_bind_text(statement.get(), 1, name.data(), static_cast<int>(name.size()),
                          SQLITE_STATIC);
        sqlite3_bind_int64(statement.get(), 2, static_cast<sqlite3_int64>(checkpoint.records_done));
        sqlite3_bind_text(statement.get(), 3, files.data(), static_cast<int>(files.size()),
                          SQLITE_STATIC);
        step_done(statement.get());
    }

    void clear_checkpoint(std::string_view name) override {
        m_appender->drain();
        begin_if_needed();
        Statement statement(m_db, "DELETE FROM checkpoints WHERE name = ?1", m_name);
        sqlite3_bind_text(statement.get(), 1, name.data(), static_cast<int>(name.size()),
                          SQLITE_STATIC);
        step_done(statement.get());
    }

    std::uint64_t collect_garbage(Timestamp now) override {
        m_appender->drain();
        auto removed = delete_expired(now);
        commit();
        m_indexes.clear(); // rebuilt from what is left
        return removed;
    }

    // Within the open transaction: the log rows and nonces that expired.
    std::uint64_t delete_expired(Timestamp now) {
        begin_if_needed();
        std::uint64_t removed = 0;
        // A fingerprint goes, first copy and repeats, once its latest first
        // copy has expired.
        for (const char* sql : {"DELETE FROM fingerprint_log WHERE (scope, fingerprint) IN (SELECT "
                                "scope, fingerprint "
                                "FROM fingerprint_log WHERE kind = 1 GROUP BY scope, fingerprint "
                                "HAVING max(expires_us) <= ?1)",
                                "DELETE FROM nonces WHERE expires_us <= ?1"}) {
            Statement statement(m_db, sql, m_name);
            sqlite3_bind_int64(statement.get(), 1, now.time_since_epoch().count());
            step_done(statement.get());
            removed += static_cast<std::uint64_t>(sqlite3_changes(m_db));
        }
        return removed;
    }

    void for_each_fingerprint_record(
        std::string_view scope,
        const std::function<void(const FingerprintRecord&)>& visit) override {
        m_appender->drain();
        detail::read_fingerprint_records(m_db, m_name, scope, visit);
    }

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) override {
        m_appender->drain();
        // One transaction for the whole batch: outside one, every lookup
        // would take and drop the file's locks.
        begin_if_needed();
        return m_reorder->load_partitions(scope, partitions);
    }

    std::vector<HeldRecordRow> load_held(std::string_view scope) override {
        m_appender->drain();
        return m_reorder->load_held(scope);
    }

    void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) override {
        m_appender->drain();
        if (changes.empty()) return;
        begin_if_needed();
        m_reorder->save(scope, changes);
    }

    void clear_reorder_state(std::string_view scope) override {
        m_appender->drain();
        begin_if_needed();
        m_reorder->clear(scope);
    }

    std::vector<ReplayClaim> claim_replays(std::string_view scope,
                                           const std::vector<std::string>& keys,
                                           std::string_view owner, Timestamp now,
                                           Timestamp lease_until, ReplayRerun rerun) override {
        m_appender->drain();
        begin_if_needed();
        return m_replay->claim(scope, keys, owner, now, lease_until, rerun);
    }

    void renew_replay_leases(std::string_view scope, const std::vector<std::string>& keys,
                             std::string_view owner, Timestamp lease_until) override {
        m_appender->drain();
        begin_if_needed();
        m_replay->renew(scope, keys, owner, lease_until);
    }

    void save_replay_entries(std::string_view scope,
                             const std::vector<ReplayEntry>& entries) override {
        m_appender->drain();
        begin_if_needed();
        m_replay->save(scope, entries);
    }

    void for_each_replay_entry(std::string_view scope,
                               const std::function<void(const ReplayEntry&)>& visit) override {
        m_appender->drain();
        m_replay->for_each(scope, visit);
    }

    void commit() override {
        m_appender->drain();
        if (!m_in_transaction) return;
        execute("COMMIT");
        m_in_transaction = false;
        m_pending = 0;
        for (auto& [scope, index] : m_indexes)
            index.current = false;
    }

    std::string describe() const override {
        return m_name == ":memory:" ? m_name : "sqlite:" + m_name;
    }

private:
    void execute(const char* sql) {
        char* error = nullptr;
        if (sqlite3_exec(m_db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
            std::string message = error ? error : "unknown error";
            sqlite3_free(error);
            throw StoreError(fmt::format("store {}: {} (during {})", quote(m_name), message, sql));
        }
    }

    void step_done(sqlite3_stmt* statement) {
        int result = sqlite3_step(statement);
        if (result != SQLITE_DONE && result != SQLITE_ROW)
            throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
        sqlite3_reset(statement);
    }

    void begin_if_needed() {
        if (m_in_transaction) return;
        execute("BEGIN IMMEDIATE");
        m_in_transaction = true;
    }

    void migrate() {
        execute("BEGIN IMMEDIATE");
        sqlite3_stmt* statement = nullptr;
        sqlite3_prepare_v2(m_db, "PRAGMA user_version", -1, &statement, nullptr);
        int version = sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int(statement, 0) : 0;
        sqlite3_finalize(statement);
        if (version > k_schema_version) {
            execute("ROLLBACK");
            throw StoreError(
                fmt::format("store {} has schema version {}, newer than this idem ({}): "
                            "upgrade idem",
                            quote(m_name), version, k_schema_version));
        }
        for (int next = version + 1; next <= k_schema_version; ++next) {
            execute(k_migrations[next]);
            execute(fmt::format("PRAGMA user_version = {}", next).c_str());
        }
        execute("COMMIT");
    }

    ScopeIndex& scope_index(std::string_view scope) {
        auto found = m_indexes.find(scope);
        if (found != m_indexes.end()) return found->second;
        return m_indexes.emplace(std::string(scope), ScopeIndex{}).first->second;
    }

    // Expired fingerprints are reclaimed without asking (--gc does it on
    // demand): on a process's first look at the log, when they are many and
    // at least half of it, so the cost is paid once and rarely.
    void reclaim_expired(ScopeIndex& index, Timestamp now) {
        constexpr std::uint64_t k_worth_it = 10'000;
        auto live = index.table.size();
        auto expired = index.table.remove_expired(now);
        if (expired >= k_worth_it && expired >= live - expired) delete_expired(now);
    }

    // Applies what was appended since this process last looked: everything
    // on the first claim, then only other processes' rows.
    void catch_up(std::string_view scope, ScopeIndex& index) {
        auto* statement = m_catch_up->get();
        sqlite3_reset(statement);
        sqlite3_bind_int64(statement, 1, index.last_seq);
        sqlite3_bind_text(statement, 2, scope.data(), static_cast<int>(scope.size()),
                          SQLITE_STATIC);
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
    void append_rows(std::string_view scope, const std::vector<Row>& rows) {
        std::size_t done = 0;
        while (rows.size() - done >= k_rows_per_insert) {
            bind_rows(m_append_many->get(), scope, rows, done, k_rows_per_insert);
            step_done(m_append_many->get());
            done += k_rows_per_insert;
        }
        for (; done < rows.size(); ++done) {
            bind_rows(m_append->get(), scope, rows, done, 1);
            step_done(m_append->get());
        }
    }

    static void bind_rows(sqlite3_stmt* statement, std::string_view scope,
                          const std::vector<Row>& rows, std::size_t first, std::size_t count) {
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

    // Input names are stored once, in sources; ids are cached per run.
    sqlite3_int64 source_id(std::string_view path) {
        // Claims come file by file: the last answer is nearly always the one.
        if (m_last_source_id && m_last_source_path == path) return m_last_source_id;
        auto found = m_source_ids.find(std::string(path));
        if (found != m_source_ids.end()) {
            m_last_source_path = found->first;
            return m_last_source_id = found->second;
        }
        m_appender->drain(); // the connection is the appender's while it works
        for (auto* statement : {m_insert_source->get(), m_source_id->get()}) {
            sqlite3_reset(statement);
            sqlite3_bind_text(statement, 1, path.data(), static_cast<int>(path.size()),
                              SQLITE_STATIC);
        }
        step_done(m_insert_source->get());
        auto* lookup = m_source_id->get();
        if (sqlite3_step(lookup) != SQLITE_ROW)
            throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
        auto id = sqlite3_column_int64(lookup, 0);
        sqlite3_reset(lookup);
        m_last_source_path = m_source_ids.emplace(std::string(path), id).first->first;
        return m_last_source_id = id;
    }

    const std::string& source_path(sqlite3_int64 id) {
        auto found = m_source_paths.find(id);
        if (found != m_source_paths.end()) return found->second;
        m_appender->drain(); // the connection is the appender's while it works
        auto* lookup = m_source_path->get();
        sqlite3_reset(lookup);
        sqlite3_bind_int64(lookup, 1, id);
        std::string path = sqlite3_step(lookup) == SQLITE_ROW
                               ? reinterpret_cast<const char*>(sqlite3_column_text(lookup, 0))
                               : std::string("?");
        sqlite3_reset(lookup);
        return m_source_paths.emplace(id, std::move(path)).first->second;
    }

    std::string m_name;
    sqlite3* m_db = nullptr;
    std::unique_ptr<Statement> m_claim;
    std::unique_ptr<Statement> m_lookup;
    std::unique_ptr<Statement> m_append;
    std::unique_ptr<Statement> m_append_many;
    std::unique_ptr<Statement> m_catch_up;
    std::unique_ptr<detail::SerialWorker> m_appender = std::make_unique<detail::SerialWorker>();
    std::map<std::string, ScopeIndex, std::less<>> m_indexes;
    std::unique_ptr<Statement> m_insert_source;
    std::unique_ptr<Statement> m_source_id;
    std::unique_ptr<Statement> m_source_path;
    std::unique_ptr<detail::SqliteReorderTables> m_reorder;
    std::unique_ptr<detail::SqliteReplayLedger> m_replay;
    std::unordered_map<std::string, sqlite3_int64> m_source_ids;
    std::string_view m_last_source_path; // a key of m_source_ids
    sqlite3_int64 m_last_source_id = 0;
    std::unordered_map<sqlite3_int64, std::string> m_source_paths;
    bool m_in_transaction = false;
    int m_pending = 0;
};

} // namespace

std::unique_ptr<Store> open_store(const StoreLocation& location) {
    if (location.kind == StoreKind::redis) return open_redis_store(location);
    if (location.kind == StoreKind::memory) return open_memory_store();
    return std::make_unique<SqliteStore>(location);
}

} // namespace idem::store
