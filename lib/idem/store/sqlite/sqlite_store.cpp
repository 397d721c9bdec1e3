#include "idem/store/checkpoints.hpp"
#include "idem/store/detail/backends.hpp"
#include "idem/store/detail/plays_roles.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/held_copies.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/sqlite/sqlite_evidence.hpp"
#include "idem/store/sqlite/sqlite_fingerprints.hpp"
#include "idem/store/sqlite/sqlite_held_copies.hpp"
#include "idem/store/sqlite/sqlite_open_windows.hpp"
#include "idem/store/sqlite/sqlite_reorder.hpp"
#include "idem/store/sqlite/sqlite_replay.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"
#include "idem/store/sqlite/sqlite_verdicts.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <fmt/format.h>
#include <map>
#include <sqlite3.h>
#include <thread>
#include <unordered_map>

namespace idem::store {

namespace {

using detail::disable_memory_statistics;
using detail::k_migrations;
using detail::k_schema_version;
using detail::Statement;

// Beside the file sizes in a checkpoint's file_bytes column (roles are
// plain words, so it cannot be one of them).
constexpr std::string_view k_finished_input = "~finished_input";
// Before a count's name in the same column (a role never starts with it).
constexpr char k_count_mark = '#';

// A long run saves its fingerprint index at a commit when this many first
// copies came since the last save, and this long ago (a run that ends saves
// it at close).
constexpr std::uint64_t k_rows_worth_saving = 100'000;
constexpr auto k_save_index_every = std::chrono::minutes(10);

// A SQLite file playing every role. Fingerprint claims are appended by a
// thread of their own (detail::SqliteFingerprintLog): every other statement
// first lets it finish (reading()), and one that writes opens the
// transaction commit() ends (writing()).
class SqliteStore final
    : public detail::PlaysRoles<FingerprintStore, EvidenceStore, NonceStore, CheckpointStore,
                                SequencerStore, HeldCopyStore, ReplayLedgerStore, VerdictStore,
                                WindowStore, EntityStore> {
public:
    explicit SqliteStore(const StoreLocation& location) : m_name(location.path) {
        disable_memory_statistics();
        m_connection = detail::open_connection(m_name, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                                                           SQLITE_OPEN_NOMUTEX);
        m_db = m_connection.get();
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
        enter_wal_mode(location.lock_timeout);
        execute("PRAGMA synchronous=NORMAL");
        // Claims touch random pages of a large B-tree: a big page cache keeps
        // them in memory between batches (about 3x the claims per second; docs/architecture.md).
        execute(fmt::format("PRAGMA cache_size=-{}", location.cache_bytes >> 10).c_str());
        migrate();
        m_claim = std::make_unique<Statement>(
            m_db,
            "INSERT OR REPLACE INTO nonces(scope, nonce, first_seen_us, expires_us, source, line) "
            "VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
            m_name);
        m_lookup = std::make_unique<Statement>(
            m_db, "SELECT first_seen_us, source, line FROM nonces WHERE scope = ?1 AND nonce = ?2",
            m_name);
        m_log = std::make_unique<detail::SqliteFingerprintLog>(m_db, m_name);
        m_reorder = std::make_unique<detail::SqliteReorderTables>(m_db, m_name);
        m_replay = std::make_unique<detail::SqliteReplayLedger>(m_db, m_name);
        m_verdicts = std::make_unique<detail::SqliteVerdicts>(m_db, m_name);
        m_held_copies = std::make_unique<detail::SqliteHeldCopies>(m_db, m_name);
        m_windows = std::make_unique<detail::SqliteOpenWindows>(m_db, m_name);
    }

    ~SqliteStore() override { close(); }

    void close() {
        save_indexes();
        m_log.reset(); // stops its appender; what it had not appended is rolled back below
        m_claim.reset();
        m_lookup.reset();
        m_reorder.reset();
        m_replay.reset();
        m_verdicts.reset();
        m_held_copies.reset();
        m_windows.reset();
        m_entity_lookup.reset();
        m_entity_save.reset();
        if (m_in_transaction) sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
        m_in_transaction = false;
        m_connection.reset();
        m_db = nullptr;
    }

    std::optional<NonceEntry> kept_nonce(std::string_view scope, std::string_view nonce) {
        auto* lookup = m_lookup->get();
        sqlite3_reset(lookup);
        detail::bind_text(lookup, 1, scope);
        detail::bind_text(lookup, 2, nonce);
        std::optional<NonceEntry> kept;
        if (detail::step_row(lookup, m_name))
            kept = NonceEntry{Timestamp(Duration(sqlite3_column_int64(lookup, 0))),
                              std::string(detail::column_bytes(lookup, 1)),
                              static_cast<std::uint64_t>(sqlite3_column_int64(lookup, 2))};
        sqlite3_reset(lookup);
        return kept;
    }

    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce,
                           const NonceSighting& sighting, Duration window,
                           Timestamp keep_until) override {
        writing();
        auto kept = kept_nonce(scope, nonce);
        auto decision = judge_nonce(kept, sighting, window);
        if (decision.store) {
            auto* statement = m_claim->get();
            sqlite3_reset(statement);
            detail::bind_text(statement, 1, scope);
            detail::bind_text(statement, 2, nonce);
            sqlite3_bind_int64(statement, 3, sighting.received_at.time_since_epoch().count());
            sqlite3_bind_int64(statement, 4, keep_until.time_since_epoch().count());
            detail::bind_text(statement, 5, sighting.source);
            sqlite3_bind_int64(statement, 6, static_cast<sqlite3_int64>(sighting.line));
            step_done(statement);
        }
        return decision.claim;
    }

    std::vector<std::optional<NonceEntry>> kept_nonces(std::span<const NonceName> names) override {
        std::vector<std::optional<NonceEntry>> kept;
        kept.reserve(names.size());
        for (const auto& name : names)
            kept.push_back(kept_nonce(name.scope, name.nonce));
        return kept;
    }

    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp now) override {
        // The write lock is held from here to commit(): nobody else can
        // append between catching up and deciding, so within one
        // transaction the index needs catching up only once.
        auto& index = current_index(scope, now);
        return m_log->claim(scope, index, claims, now);
    }

    // Room in the index for the fingerprints a run says are coming.
    void expect_fingerprints(std::string_view scope, std::uint64_t records) override {
        auto& index = scope_index(scope);
        index.expected = records;
        if (index.looked)
            index.slots.reserve(index.slots.size() + detail::room_ahead(index.slots, records));
    }

    // A release lowers the first copy's expiry in its row, where every
    // process reads it when the fingerprint comes again.
    void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                             Timestamp now) override {
        auto& index = current_index(scope, now);
        m_log->release(scope, index, fingerprint, now);
    }

    std::optional<Checkpoint> load_checkpoint(std::string_view name) override {
        reading();
        Statement statement(
            m_db, "SELECT records_done, file_bytes FROM checkpoints WHERE name = ?1", m_name);
        sqlite3_bind_text(statement.get(), 1, name.data(), static_cast<int>(name.size()),
                          SQLITE_STATIC);
        if (!detail::step_row(statement.get(), m_name)) return std::nullopt;
        Checkpoint checkpoint;
        checkpoint.records_done =
            static_cast<std::uint64_t>(sqlite3_column_int64(statement.get(), 0));
        std::string_view files =
            reinterpret_cast<const char*>(sqlite3_column_text(statement.get(), 1));
        for (auto item : split(files, ',')) {
            auto equals = item.find('=');
            if (equals == std::string_view::npos) continue;
            std::uint64_t value = 0;
            std::from_chars(item.data() + equals + 1, item.data() + item.size(), value);
            auto field = item.substr(0, equals);
            if (field == k_finished_input)
                checkpoint.finished_input = value;
            else if (field.starts_with(k_count_mark))
                checkpoint.counts[std::string(field.substr(1))] = value;
            else
                checkpoint.file_bytes[std::string(field)] = value;
        }
        return checkpoint;
    }

    void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) override {
        writing();
        std::string files;
        for (const auto& [role, bytes] : checkpoint.file_bytes)
            files += fmt::format("{}{}={}", files.empty() ? "" : ",", role, bytes);
        if (checkpoint.finished_input)
            files += fmt::format("{}{}={}", files.empty() ? "" : ",", k_finished_input,
                                 *checkpoint.finished_input);
        for (const auto& [counted, count] : checkpoint.counts)
            files +=
                fmt::format("{}{}{}={}", files.empty() ? "" : ",", k_count_mark, counted, count);
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
        writing();
        Statement statement(m_db, "DELETE FROM checkpoints WHERE name = ?1", m_name);
        sqlite3_bind_text(statement.get(), 1, name.data(), static_cast<int>(name.size()),
                          SQLITE_STATIC);
        step_done(statement.get());
    }

    std::uint64_t collect_garbage(Timestamp now) override {
        reading();
        auto removed = delete_expired(now);
        commit();
        m_indexes.clear(); // rebuilt from what is left
        return removed;
    }

    // Within the open transaction: the log rows and nonces that expired.
    std::uint64_t delete_expired(Timestamp now) {
        writing();
        // The highest seq is kept aside: a seq is never given twice, even
        // when the rows that had the highest ones go.
        execute("INSERT INTO store_meta(name, value) VALUES('fingerprint_seq', (SELECT "
                "coalesce(max(seq), 0) FROM fingerprint_log)) ON CONFLICT(name) DO UPDATE SET "
                "value = max(value, excluded.value)");
        // What each deletion counts in the rows removed: a first copy's line
        // in fingerprint_repeats is part of its row.
        enum class Counts { log_rows, nothing, nonces };
        struct Deletion {
            const char* sql;
            Counts counts;
        };
        // A fingerprint goes, first copies and repeats, once its latest first
        // copy has expired: a first copy replaced by a later one carries the
        // later one's expiry.
        static constexpr Deletion k_deletions[] = {
            {"DELETE FROM fingerprint_log WHERE kind = 2 AND first_seq IN (SELECT seq FROM "
             "fingerprint_log WHERE kind = 1 AND expires_us <= ?1)",
             Counts::log_rows},
            {"DELETE FROM fingerprint_repeats WHERE seq IN (SELECT seq FROM fingerprint_log "
             "WHERE kind = 1 AND expires_us <= ?1)",
             Counts::nothing},
            {"DELETE FROM fingerprint_log WHERE kind = 1 AND expires_us <= ?1", Counts::log_rows},
            {"DELETE FROM nonces WHERE expires_us <= ?1", Counts::nonces},
        };
        std::uint64_t removed = 0, log_rows = 0;
        for (const auto& deletion : k_deletions) {
            Statement statement(m_db, deletion.sql, m_name);
            sqlite3_bind_int64(statement.get(), 1, now.time_since_epoch().count());
            step_done(statement.get());
            auto changes = static_cast<std::uint64_t>(sqlite3_changes(m_db));
            if (deletion.counts != Counts::nothing) removed += changes;
            if (deletion.counts == Counts::log_rows) log_rows += changes;
        }
        if (log_rows) m_log->after_collecting_garbage();
        return removed;
    }

    void for_each_fingerprint_record(
        std::string_view scope,
        const std::function<void(const FingerprintRecord&)>& visit) override {
        reading();
        detail::read_fingerprint_records(m_db, m_name, scope, visit);
    }

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) override {
        // One transaction for the whole batch: outside one, every lookup
        // would take and drop the file's locks.
        writing();
        return m_reorder->load_partitions(scope, partitions);
    }

    std::vector<HeldRecordRow> load_held(std::string_view scope) override {
        reading();
        return m_reorder->load_held(scope);
    }

    void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) override {
        if (changes.empty()) return;
        writing();
        m_reorder->save(scope, changes);
    }

    void clear_reorder_state(std::string_view scope) override {
        writing();
        m_reorder->clear(scope);
    }

    std::vector<ReplayClaim> claim_replays(std::string_view scope,
                                           const std::vector<std::string>& keys,
                                           std::string_view owner, Timestamp now,
                                           Timestamp lease_until, ReplayRerun rerun) override {
        writing();
        return m_replay->claim(scope, keys, owner, now, lease_until, rerun);
    }

    void renew_replay_leases(std::string_view scope, const std::vector<std::string>& keys,
                             std::string_view owner, Timestamp lease_until) override {
        writing();
        m_replay->renew(scope, keys, owner, lease_until);
    }

    void save_replay_entries(std::string_view scope,
                             const std::vector<ReplayEntry>& entries) override {
        writing();
        m_replay->save(scope, entries);
    }

    void for_each_replay_entry(std::string_view scope,
                               const std::function<void(const ReplayEntry&)>& visit) override {
        reading();
        m_replay->for_each(scope, visit);
    }

    void save_verdicts(std::string_view scope,
                       const std::vector<VerdictRecord>& verdicts) override {
        if (verdicts.empty()) return;
        writing();
        m_verdicts->save(scope, verdicts);
    }

    void for_each_verdict(std::string_view scope,
                          const std::function<void(const VerdictRecord&)>& visit) override {
        reading();
        m_verdicts->for_each(scope, visit);
    }

    std::vector<HeldCopyRow> load_held_copies(std::string_view name) override {
        reading();
        return m_held_copies->load(name);
    }

    void save_held_copies(std::string_view name, const HeldCopyChanges& changes) override {
        if (changes.empty()) return;
        writing();
        m_held_copies->save(name, changes);
    }

    void clear_held_copies(std::string_view name) override {
        writing();
        m_held_copies->clear(name);
    }

    std::vector<std::pair<std::string, std::string>> load_windows(std::string_view name,
                                                                  std::string& meta) override {
        reading();
        return m_windows->load(name, meta);
    }

    void save_windows(std::string_view name, const WindowChanges& changes) override {
        writing();
        m_windows->save(name, changes);
    }

    void clear_windows(std::string_view name) override {
        writing();
        m_windows->clear(name);
    }

    std::vector<std::optional<std::string>>
    load_entities(std::string_view scope, const std::vector<std::string>& entities) override {
        // One transaction for the whole batch, as load_partitions.
        writing();
        if (!m_entity_lookup)
            m_entity_lookup = std::make_unique<Statement>(
                m_db, "SELECT state FROM state_entities WHERE scope = ?1 AND entity = ?2", m_name);
        std::vector<std::optional<std::string>> found(entities.size());
        auto* statement = m_entity_lookup->get();
        for (std::size_t i = 0; i < entities.size(); ++i) {
            sqlite3_reset(statement);
            detail::bind_text(statement, 1, scope);
            detail::bind_blob(statement, 2, entities[i]);
            int result = sqlite3_step(statement);
            if (result == SQLITE_ROW)
                found[i] = detail::column_bytes(statement, 0);
            else if (result != SQLITE_DONE)
                throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
        }
        sqlite3_reset(statement);
        return found;
    }

    void save_entities(std::string_view scope,
                       const std::vector<std::pair<std::string, std::string>>& states) override {
        if (states.empty()) return;
        writing();
        if (!m_entity_save)
            m_entity_save = std::make_unique<Statement>(
                m_db,
                "INSERT OR REPLACE INTO state_entities(scope, entity, state) VALUES(?1, ?2, ?3)",
                m_name);
        auto* statement = m_entity_save->get();
        for (const auto& [entity, state] : states) {
            detail::bind_text(statement, 1, scope);
            detail::bind_blob(statement, 2, entity);
            detail::bind_blob(statement, 3, state);
            step_done(statement);
        }
    }

    void clear_entities(std::string_view scope) override {
        writing();
        Statement statement(m_db, "DELETE FROM state_entities WHERE scope = ?1", m_name);
        detail::bind_text(statement.get(), 1, scope);
        step_done(statement.get());
    }

    void commit() override {
        reading();
        if (!m_in_transaction) return;
        // A long run (listen) saves its index now and then, with the rows
        // it covers, so a process killed later reads only what came after.
        auto now = std::chrono::steady_clock::now();
        for (auto& [scope, index] : m_indexes)
            if (index.rows_since_saved >= k_rows_worth_saving &&
                now - index.saved_at >= k_save_index_every)
                m_log->save_index(scope, index);
        execute("COMMIT");
        m_in_transaction = false;
        m_pending = 0;
        end_transaction();
    }

    std::string describe() const override { return "sqlite:" + m_name; }

private:
    // Before any statement: the fingerprint log's appender is done.
    void reading() { m_log->drain(); }
    // Before one that writes: within the transaction commit() ends.
    void writing() {
        m_log->drain();
        begin_if_needed();
    }

    void execute(const char* sql) { detail::execute(m_db, m_name, sql); }

    void step_done(sqlite3_stmt* statement) { detail::step_done(m_db, m_name, statement); }

    // Turning a new file to WAL takes the exclusive lock, and when several
    // processes create the same file at once SQLite answers SQLITE_BUSY
    // without calling the busy handler (waiting could deadlock: each holds a
    // shared lock). Waiting here, with no lock held, cannot: retry until the
    // lock timeout, as the busy handler would have.
    void enter_wal_mode(Duration lock_timeout) {
        auto deadline = std::chrono::steady_clock::now() + lock_timeout;
        auto pause = std::chrono::milliseconds(1);
        for (;;) {
            int status = sqlite3_exec(m_db, "PRAGMA journal_mode=WAL", nullptr, nullptr, nullptr);
            if (status == SQLITE_OK) return;
            if ((status & 0xff) != SQLITE_BUSY || std::chrono::steady_clock::now() >= deadline)
                throw StoreError(fmt::format("store {}: {} (during PRAGMA journal_mode=WAL)",
                                             quote(m_name), sqlite3_errmsg(m_db)));
            std::this_thread::sleep_for(pause);
            pause = std::min(pause * 2, std::chrono::milliseconds(100));
        }
    }

    void begin_if_needed() {
        if (m_in_transaction) return;
        execute("BEGIN IMMEDIATE");
        m_in_transaction = true;
    }

    void migrate() {
        execute("BEGIN IMMEDIATE");
        auto version = detail::query_integer(m_db, m_name, "PRAGMA user_version");
        if (version > k_schema_version) {
            execute("ROLLBACK");
            throw StoreError(
                fmt::format("store {} has schema version {}, newer than this idem ({}): "
                            "upgrade idem",
                            quote(m_name), version, k_schema_version));
        }
        for (auto next = version + 1; next <= k_schema_version; ++next) {
            execute(k_migrations[next]);
            execute(fmt::format("PRAGMA user_version = {}", next).c_str());
        }
        execute("COMMIT");
    }

    // The scope's index, caught up within the open write transaction; on a
    // process's first look, loaded from the store and expired rows
    // collected when they are many.
    detail::ScopeIndex& current_index(std::string_view scope, Timestamp now) {
        auto& index = scope_index(scope);
        if (m_in_transaction && index.current) return index;
        writing();
        if (!index.looked && m_log->first_look(scope, index, now)) {
            delete_expired(now);
            m_log->rebuild(scope, index);
        }
        m_log->catch_up(scope, index);
        index.current = true;
        return index;
    }

    void end_transaction() {
        m_log->transaction_ended();
        for (auto& [scope, index] : m_indexes) {
            index.current = false;
            index.heads.clear();
        }
    }

    // At close, after the last commit: the next process loads the index
    // instead of reading the log. Nothing is lost when it cannot be saved.
    void save_indexes() noexcept {
        if (!m_db || !m_log || m_in_transaction) return;
        bool any = false;
        for (auto& [scope, index] : m_indexes)
            any = any || (index.looked && index.last_seq > index.saved_seq);
        if (!any) return;
        try {
            writing();
            for (auto& [scope, index] : m_indexes)
                m_log->save_index(scope, index);
            commit();
        } catch (const std::exception&) {
            if (m_in_transaction) sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
            m_in_transaction = false;
        }
    }

    detail::ScopeIndex& scope_index(std::string_view scope) {
        auto found = m_indexes.find(scope);
        if (found != m_indexes.end()) return found->second;
        return m_indexes.emplace(std::string(scope), detail::ScopeIndex{}).first->second;
    }

    std::string m_name;
    detail::UniqueSqlite m_connection; // closed last: every statement goes first (close())
    sqlite3* m_db = nullptr;           // m_connection's
    std::unique_ptr<Statement> m_claim;
    std::unique_ptr<Statement> m_lookup;
    std::unique_ptr<detail::SqliteFingerprintLog> m_log;
    std::map<std::string, detail::ScopeIndex, std::less<>> m_indexes;
    std::unique_ptr<detail::SqliteReorderTables> m_reorder;
    std::unique_ptr<detail::SqliteVerdicts> m_verdicts;
    std::unique_ptr<detail::SqliteReplayLedger> m_replay;
    std::unique_ptr<detail::SqliteHeldCopies> m_held_copies;
    std::unique_ptr<detail::SqliteOpenWindows> m_windows;
    std::unique_ptr<Statement> m_entity_lookup, m_entity_save;
    bool m_in_transaction = false;
    int m_pending = 0;
};

} // namespace

namespace detail {

std::unique_ptr<Store> open_sqlite_store(const StoreLocation& location) {
    return std::make_unique<SqliteStore>(location);
}

} // namespace detail

} // namespace idem::store
