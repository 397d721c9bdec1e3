#include "idem/store/sqlite/sqlite_fingerprints.hpp"

#include "idem/store/detail/fingerprint_table.hpp"
#include "idem/store/sqlite/saved_slots_file.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <optional>

namespace idem::store::detail {

namespace {

constexpr int k_columns = 9;
// Rows per multi-row INSERT into the fingerprint log.
constexpr std::size_t k_rows_per_insert = 64;
// Expired first copies are collected without asking once they are this
// many and at least half of the index (docs/dedup.md).
constexpr std::uint64_t k_worth_collecting = 10'000;

// The store's file, as SQLite opened it (absolute): the saved slots' files
// lie beside it. Empty for a store with no file.
std::string database_path(sqlite3* db) {
    const char* path = sqlite3_db_filename(db, "main");
    return path ? std::string(path) : std::string();
}

std::string insert_rows(std::size_t rows) {
    std::string sql = "INSERT INTO fingerprint_log(seq, scope, fingerprint, kind, event_time_us, "
                      "expires_us, source, line, first_seq) VALUES ";
    for (std::size_t i = 0; i < rows; ++i)
        sql += i == 0 ? "(?,?,?,?,?,?,?,?,?)" : ",(?,?,?,?,?,?,?,?,?)";
    return sql;
}

// A first copy's row and its repeats' line, from column 0 of a statement
// whose FROM has them as `log` and `more`.
constexpr const char* k_head_columns =
    "log.fingerprint, log.event_time_us, log.expires_us, coalesce(more.repeats, 0), log.source, "
    "log.line, coalesce(more.last_source, 0), coalesce(more.last_line, 0), "
    "coalesce(more.last_time_us, 0)";

void bind_optional(sqlite3_stmt* statement, int index, sqlite3_int64 value) {
    if (value == 0)
        sqlite3_bind_null(statement, index);
    else
        sqlite3_bind_int64(statement, index, value);
}

} // namespace

// A row to append: a first copy (kind 1) or a repeat kept as evidence
// (kind 2: no scope or fingerprint of its own, its first copy's row has them).
struct SqliteFingerprintLog::Row {
    sqlite3_int64 seq = 0;
    int kind = 1;
    FingerprintBytes fingerprint{};
    sqlite3_int64 event_time_us = 0, expires_us = 0, source = 0, line = 0;
    sqlite3_int64 first_seq = 0;
};

SqliteFingerprintLog::Reader::Reader(const std::string& path)
    : connection(open_connection(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX)),
      db(connection.get()) {
    sqlite3_busy_timeout(db, 5000);
    // The first copies a run repeats, read back: kept apart from the store's
    // own cache, which holds the pages being appended.
    sqlite3_exec(db, "PRAGMA cache_size=-65536", nullptr, nullptr, nullptr);
}

SqliteFingerprintLog::Reader::~Reader() {
    if (reading) sqlite3_exec(db, "COMMIT", nullptr, nullptr, nullptr);
}

sqlite3* SqliteFingerprintLog::reader() {
    if (!m_reader.reading) {
        execute(m_reader.db, m_name, "BEGIN");
        m_reader.reading = true;
    }
    return m_reader.db;
}

SqliteFingerprintLog::SqliteFingerprintLog(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name), m_path(database_path(db)), m_reader(store_name),
      m_append(db, insert_rows(1).c_str(), store_name),
      m_append_many(db, insert_rows(k_rows_per_insert).c_str(), store_name),
      m_update_repeats(db,
                       "INSERT INTO fingerprint_repeats(seq, repeats, last_source, last_line, "
                       "last_time_us) VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(seq) DO UPDATE SET "
                       "repeats = excluded.repeats, last_source = excluded.last_source, "
                       "last_line = excluded.last_line, last_time_us = excluded.last_time_us",
                       store_name),
      m_update_expiry(db, "UPDATE fingerprint_log SET expires_us = ?2 WHERE seq = ?1", store_name),
      m_read_head(m_reader.db,
                  (std::string("SELECT ") + k_head_columns +
                   " FROM fingerprint_log AS log LEFT JOIN fingerprint_repeats AS more "
                   "ON more.seq = log.seq WHERE log.seq = ?1 AND log.kind = 1")
                      .c_str(),
                  store_name),
      m_read_heads_between(m_reader.db,
                           (std::string("SELECT log.seq, ") + k_head_columns +
                            " FROM fingerprint_log AS log LEFT JOIN fingerprint_repeats AS more "
                            "ON more.seq = log.seq WHERE log.seq BETWEEN ?1 AND ?2 AND "
                            "log.kind = 1")
                               .c_str(),
                           store_name),
      m_catch_up(db,
                 "SELECT seq, fingerprint FROM fingerprint_log "
                 "WHERE seq > ?1 AND scope = ?2 AND kind = 1 ORDER BY seq",
                 store_name),
      m_insert_source(db, "INSERT OR IGNORE INTO sources(path) VALUES(?1)", store_name),
      m_source_id(db, "SELECT id FROM sources WHERE path = ?1", store_name),
      m_source_path(db, "SELECT path FROM sources WHERE id = ?1", store_name) {}

SqliteFingerprintLog::~SqliteFingerprintLog() = default;

std::int64_t SqliteFingerprintLog::gc_generation() {
    return query_integer(m_db, m_name,
                         "SELECT value FROM store_meta WHERE name = 'fingerprint_gc'");
}

sqlite3_int64 SqliteFingerprintLog::next_seq() {
    if (m_next_seq == 0) {
        m_appender.drain();
        // Never a seq used before, even by rows collected since: processes
        // catch up by seq.
        m_next_seq = 1 + query_integer(m_db, m_name,
                                       "SELECT max(coalesce((SELECT max(seq) FROM "
                                       "fingerprint_log), 0), coalesce((SELECT value FROM "
                                       "store_meta WHERE name = 'fingerprint_seq'), 0))");
    }
    return m_next_seq++;
}

void SqliteFingerprintLog::transaction_ended() {
    m_next_seq = 0;
    if (m_reader.reading) sqlite3_exec(m_reader.db, "COMMIT", nullptr, nullptr, nullptr);
    m_reader.reading = false;
}

// A first copy's row as m_read_head and m_read_heads_between select it,
// from column `at` on.
static FingerprintHead head_from(sqlite3_stmt* statement, int at) {
    FingerprintHead head;
    head.fingerprint = fingerprint_column(statement, at);
    head.first_seen_us = sqlite3_column_int64(statement, at + 1);
    head.expires_us = sqlite3_column_int64(statement, at + 2);
    head.repeats = static_cast<std::uint64_t>(sqlite3_column_int64(statement, at + 3));
    head.source = sqlite3_column_int64(statement, at + 4);
    head.line = sqlite3_column_int64(statement, at + 5);
    head.last_source = sqlite3_column_int64(statement, at + 6);
    head.last_line = sqlite3_column_int64(statement, at + 7);
    head.last_time_us = sqlite3_column_int64(statement, at + 8);
    return head;
}

// The first copy's row `seq`, read into the head cache; null when it is
// gone (collected since the index was built).
FingerprintHead* SqliteFingerprintLog::read_head(ScopeIndex& index, sqlite3_int64 seq) {
    reader();
    auto* statement = m_read_head.get();
    sqlite3_reset(statement);
    sqlite3_bind_int64(statement, 1, seq);
    int step = sqlite3_step(statement);
    FingerprintHead* head = nullptr;
    if (step == SQLITE_ROW) head = &index.heads.insert(seq, head_from(statement, 0));
    sqlite3_reset(statement);
    if (step != SQLITE_ROW && step != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_reader.db)));
    return head;
}

const FingerprintHead* SqliteFingerprintLog::head_at(ScopeIndex& index, sqlite3_int64 seq,
                                                     const FingerprintBytes& fingerprint) {
    auto* found = index.heads.find(seq);
    if (!found) found = read_head(index, seq);
    return found && found->fingerprint == fingerprint ? found : nullptr;
}

// The first copies a batch repeats, read before its claims in seq order:
// one pass over the log's pages, and one scan when they lie close together
// (a rerun of a file repeats its first copies in their order), where one
// statement per claim, in claim order, would jump about the file.
void SqliteFingerprintLog::read_heads_ahead(ScopeIndex& index,
                                            const std::vector<FingerprintClaim>& claims) {
    auto& wanted = m_wanted;
    wanted.clear();
    m_saved_slot_holds_claim.assign(claims.size(), 0);
    for (std::size_t i = 0; i < claims.size(); ++i) {
        if (i + k_claims_prefetched_ahead < claims.size())
            index.slots.prefetch(claims[i + k_claims_prefetched_ahead].fingerprint);
        index.slots.for_each_candidate(claims[i].fingerprint, [&](sqlite3_int64 seq, bool saved) {
            m_saved_slot_holds_claim[i] |= saved ? 1 : 0;
            if (!index.heads.find(seq)) wanted.push_back(seq);
        });
    }
    if (wanted.size() < 16) return; // read as they come
    std::sort(wanted.begin(), wanted.end());
    wanted.erase(std::unique(wanted.begin(), wanted.end()), wanted.end());
    reader();
    auto span = static_cast<std::size_t>(wanted.back() - wanted.front()) + 1;
    if (span <= wanted.size() * 4) {
        auto* statement = m_read_heads_between.get();
        sqlite3_reset(statement);
        sqlite3_bind_int64(statement, 1, wanted.front());
        sqlite3_bind_int64(statement, 2, wanted.back());
        int step;
        while ((step = sqlite3_step(statement)) == SQLITE_ROW) {
            auto seq = sqlite3_column_int64(statement, 0);
            if (std::binary_search(wanted.begin(), wanted.end(), seq) && !index.heads.find(seq))
                index.heads.insert(seq, head_from(statement, 1));
        }
        sqlite3_reset(statement);
        if (step != SQLITE_DONE)
            throw StoreError(
                fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_reader.db)));
        return;
    }
    for (auto seq : wanted)
        read_head(index, seq);
}

bool SqliteFingerprintLog::is_first_copy_of(ScopeIndex& index, sqlite3_int64 seq,
                                            const FingerprintBytes& fingerprint) {
    return head_at(index, seq, fingerprint) != nullptr;
}

void SqliteFingerprintLog::put(std::string_view scope, ScopeIndex& index,
                               const FingerprintBytes& fingerprint, FingerprintSlots::Place place,
                               sqlite3_int64 seq) {
    if (!index.slots.fits(seq))
        throw StoreError(fmt::format(
            "store {}: the fingerprints kept in scope '{}' span more than 4 billion rows of the "
            "log; idem dedup --gc, or a shorter --ttl, lets the oldest go",
            quote(m_name), scope));
    auto change = index.slots.put(fingerprint, place, seq);
    if (!index.changes_kept) return;
    if (index.saved_changes + index.changes.size() >= delta_limit(index)) {
        index.changes_kept = false; // the next save writes the slots whole
        std::vector<FingerprintSlots::Change>().swap(index.changes);
        return;
    }
    index.changes.push_back(change);
}

std::uint64_t SqliteFingerprintLog::delta_limit(const ScopeIndex& index) {
    return std::max<std::uint64_t>(4096, index.slots.size() / 4);
}

void SqliteFingerprintLog::catch_up(std::string_view scope, ScopeIndex& index) {
    auto* statement = m_catch_up.get();
    sqlite3_reset(statement);
    sqlite3_bind_int64(statement, 1, index.last_seq);
    bind_text(statement, 2, scope);
    // The rows are applied in batches, each row's home slot asked for a
    // few rows ahead as a claim's is: in a large index every probe missed
    // the caches, and reading back the rows since the index was saved cost
    // about 0.2 s per million at 50M fingerprints.
    auto& rows = m_caught_up;
    auto apply = [&] {
        for (std::size_t i = 0; i < rows.size(); ++i) {
            if (i + k_claims_prefetched_ahead < rows.size())
                index.slots.prefetch(rows[i + k_claims_prefetched_ahead].second);
            auto seq = rows[i].first;
            const auto& fingerprint = rows[i].second;
            auto place = index.slots.find(fingerprint, [&](sqlite3_int64 candidate) {
                return is_first_copy_of(index, candidate, fingerprint);
            });
            put(scope, index, fingerprint, place, seq);
            index.last_seq = seq;
            ++index.rows_since_saved;
        }
        rows.clear();
    };
    constexpr std::size_t k_rows_per_batch = 4096;
    rows.clear();
    int step;
    while ((step = sqlite3_step(statement)) == SQLITE_ROW) {
        rows.emplace_back(sqlite3_column_int64(statement, 0), fingerprint_column(statement, 1));
        if (rows.size() == k_rows_per_batch) apply();
    }
    apply();
    sqlite3_reset(statement);
    if (step != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
}

bool SqliteFingerprintLog::first_look(std::string_view scope, ScopeIndex& index, Timestamp now) {
    m_appender.drain();
    index.gc_generation = gc_generation();
    load_saved_index(scope, index);
    if (!apply_saved_deltas(scope, index)) load_saved_index(scope, index);
    index.loaded_capacity = index.slots.capacity();
    catch_up(scope, index);
    index.slots.reserve(index.slots.size() + room_ahead(index.slots, index.expected));
    index.looked = true;
    // Estimated from a sample of first copies (a count would read them all);
    // a draw that lands among repeats or other scopes' rows is not counted.
    auto span = query_integer(m_db, m_name, "SELECT coalesce(max(seq), 0) FROM fingerprint_log");
    if (index.slots.size() < k_worth_collecting || span == 0) return false;
    Statement sample(m_db,
                     "SELECT expires_us FROM fingerprint_log WHERE seq >= ?1 AND seq < ?1 + 256 "
                     "AND kind = 1 AND scope = ?2 LIMIT 1",
                     m_name);
    std::uint64_t state = 0x9e3779b97f4a7c15U, sampled = 0, expired = 0;
    for (int draw = 0; draw < 64; ++draw) {
        state ^= state << 13, state ^= state >> 7, state ^= state << 17; // xorshift
        sqlite3_reset(sample.get());
        sqlite3_bind_int64(
            sample.get(), 1,
            1 + static_cast<sqlite3_int64>(state % static_cast<std::uint64_t>(span)));
        bind_text(sample.get(), 2, scope);
        if (!step_row(sample.get(), m_name)) continue;
        ++sampled;
        expired += sqlite3_column_int64(sample.get(), 0) <= now.time_since_epoch().count();
    }
    return sampled >= 16 && expired * 2 >= sampled &&
           expired * index.slots.size() >= k_worth_collecting * sampled;
}

void SqliteFingerprintLog::rebuild(std::string_view scope, ScopeIndex& index) {
    m_appender.drain();
    index.gc_generation = gc_generation();
    index.slots = FingerprintSlots();
    index.last_seq = 0;
    mark_saved(index, 0);
    index.loaded_capacity = 0;
    catch_up(scope, index);
}

std::vector<FingerprintResult>
SqliteFingerprintLog::claim(std::string_view scope, ScopeIndex& index,
                            const std::vector<FingerprintClaim>& claims, Timestamp now) {
    std::vector<Row> rows;
    {
        std::lock_guard lock(m_spare_mutex);
        rows.swap(m_spare_rows);
    }
    rows.clear();
    rows.reserve(claims.size());
    std::vector<sqlite3_int64> changed; // first copies read from the log and changed
    auto mark_changed = [&](sqlite3_int64 seq, FingerprintHead& head) {
        if (head.unwritten || head.changed) return;
        head.changed = true;
        changed.push_back(seq);
    };
    read_heads_ahead(index, claims);
    std::vector<FingerprintResult> results(claims.size());
    for (std::size_t i = 0; i < claims.size(); ++i) {
        const auto& claim = claims[i];
        if (i + k_claims_prefetched_ahead < claims.size())
            index.slots.prefetch(claims[i + k_claims_prefetched_ahead].fingerprint);
        auto source = source_id(claim.source);
        auto place = index.slots.find(
            claim.fingerprint,
            [&](sqlite3_int64 seq) { return is_first_copy_of(index, seq, claim.fingerprint); },
            m_saved_slot_holds_claim[i] != 0);
        auto* head = place.seq ? index.heads.find(place.seq) : nullptr;
        auto event_us = claim.event_time.time_since_epoch().count();
        auto line = static_cast<sqlite3_int64>(claim.line);
        auto& result = results[i];
        if (!head || claims_anew(claim, Timestamp(Duration(head->first_seen_us)),
                                 Timestamp(Duration(head->expires_us)), now)) {
            auto seq = next_seq();
            auto expires_us = claim.expires_at.time_since_epoch().count();
            // A first copy replaced keeps the latest expiry of its
            // fingerprint: garbage collection takes the rows together.
            if (head && expires_us > head->expires_us) {
                head->expires_us = expires_us;
                head->expiry_changed = true;
                mark_changed(place.seq, *head);
            }
            put(scope, index, claim.fingerprint, place, seq);
            FingerprintHead fresh;
            fresh.fingerprint = claim.fingerprint;
            fresh.first_seen_us = event_us;
            fresh.expires_us = expires_us;
            fresh.source = source;
            fresh.line = line;
            fresh.unwritten = true;
            index.heads.insert(seq, fresh); // `head` is not used past here
            Row row;
            row.seq = seq;
            row.kind = 1;
            rows.push_back(row);
            ++index.rows_since_saved;
            result.first = true;
            result.seen_count = 1;
            result.first_seen = claim.event_time;
        } else {
            ++head->repeats;
            head->last_source = source;
            head->last_line = line;
            head->last_time_us = event_us;
            mark_changed(place.seq, *head);
            if (head->repeats <= k_kept_repeats) {
                Row row;
                row.seq = next_seq();
                row.kind = 2;
                row.event_time_us = event_us;
                row.source = source;
                row.line = line;
                row.first_seq = place.seq;
                rows.push_back(row);
            }
            result.first = false;
            result.seen_count = head->repeats + 1;
            result.first_seen = Timestamp(Duration(head->first_seen_us));
            result.first_source = source_path(head->source);
            result.first_line = static_cast<std::uint64_t>(head->line);
        }
    }
    append_batch(scope, index, std::move(rows), std::move(changed));
    return results;
}

// A claimed batch's rows and the first copies it changed, to the log: the
// first copies go in with what their batch added to them, written by the
// appender while the caller writes its output (the index and this
// transaction's rows already hold the decisions).
void SqliteFingerprintLog::append_batch(std::string_view scope, ScopeIndex& index,
                                        std::vector<Row> rows, std::vector<sqlite3_int64> changed) {
    if (rows.empty() && changed.empty()) {
        std::lock_guard lock(m_spare_mutex);
        m_spare_rows.swap(rows);
        return;
    }
    // First copies go in with what their batch added to them.
    for (auto& row : rows) {
        if (row.kind != 1) continue;
        auto& head = *index.heads.find(row.seq);
        row.fingerprint = head.fingerprint;
        row.event_time_us = head.first_seen_us;
        row.expires_us = head.expires_us;
        row.source = head.source;
        row.line = head.line;
        head.unwritten = false;
        // Repeated within its batch: its count goes in with it.
        if (head.repeats > 0 && !head.changed) {
            head.changed = true;
            changed.push_back(row.seq);
        }
    }
    std::vector<std::pair<sqlite3_int64, FingerprintHead>> updates;
    updates.reserve(changed.size());
    for (auto seq : changed) {
        auto& head = *index.heads.find(seq);
        updates.emplace_back(seq, head);
        head.changed = head.expiry_changed = false;
    }
    if (m_next_seq != 0) index.last_seq = m_next_seq - 1;
    // Written by the appender while the caller writes its output; the
    // index and this transaction's rows already hold the decisions.
    m_appender.post([this, scope = std::string(scope), rows = std::move(rows),
                     updates = std::move(updates)]() mutable {
        append_rows(scope, rows);
        update_heads(updates);
        std::lock_guard lock(m_spare_mutex);
        m_spare_rows.swap(rows);
    });
}

void SqliteFingerprintLog::release(std::string_view, ScopeIndex& index,
                                   const FingerprintBytes& fingerprint, Timestamp now) {
    auto place = index.slots.find(
        fingerprint, [&](sqlite3_int64 seq) { return is_first_copy_of(index, seq, fingerprint); });
    if (place.seq == 0) return;
    auto& head = *index.heads.find(place.seq);
    auto now_us = now.time_since_epoch().count();
    if (head.expires_us <= now_us) return;
    head.expires_us = now_us;
    head.expiry_changed = true;
    m_appender.drain();
    update_heads({{place.seq, head}});
    head.expiry_changed = false;
}

void SqliteFingerprintLog::after_collecting_garbage() {
    m_appender.drain();
    execute(m_db, m_name,
            "INSERT INTO store_meta(name, value) VALUES('fingerprint_gc', 1) "
            "ON CONFLICT(name) DO UPDATE SET value = value + 1; DELETE FROM fingerprint_index; "
            "DELETE FROM fingerprint_index_delta");
    // A process that mapped one keeps it until it ends.
    if (!m_path.empty()) remove_saved_slots_except(m_path, {});
}

// Appends the decided rows: k_rows_per_insert at a time through one
// multi-row INSERT (a statement step per row was most of the cost), the
// rest one by one.
void SqliteFingerprintLog::append_rows(std::string_view scope, const std::vector<Row>& rows) {
    auto bind = [&](sqlite3_stmt* statement, std::size_t first, std::size_t count) {
        sqlite3_reset(statement);
        for (std::size_t i = 0; i < count; ++i) {
            const auto& row = rows[first + i];
            int base = static_cast<int>(i) * k_columns;
            bool first_copy = row.kind == 1;
            sqlite3_bind_int64(statement, base + 1, row.seq);
            bind_text(statement, base + 2, first_copy ? scope : std::string_view());
            sqlite3_bind_blob(statement, base + 3, row.fingerprint.data(),
                              first_copy ? static_cast<int>(row.fingerprint.size()) : 0,
                              SQLITE_STATIC);
            sqlite3_bind_int(statement, base + 4, row.kind);
            sqlite3_bind_int64(statement, base + 5, row.event_time_us);
            sqlite3_bind_int64(statement, base + 6, row.expires_us);
            sqlite3_bind_int64(statement, base + 7, row.source);
            sqlite3_bind_int64(statement, base + 8, row.line);
            bind_optional(statement, base + 9, row.first_seq);
        }
    };
    std::size_t done = 0;
    while (rows.size() - done >= k_rows_per_insert) {
        bind(m_append_many.get(), done, k_rows_per_insert);
        step_done(m_db, m_name, m_append_many.get());
        done += k_rows_per_insert;
    }
    for (; done < rows.size(); ++done) {
        bind(m_append.get(), done, 1);
        step_done(m_db, m_name, m_append.get());
    }
}

void SqliteFingerprintLog::update_heads(
    const std::vector<std::pair<sqlite3_int64, FingerprintHead>>& heads) {
    for (const auto& [seq, head] : heads) {
        if (head.repeats > 0) {
            auto* statement = m_update_repeats.get();
            sqlite3_reset(statement);
            sqlite3_bind_int64(statement, 1, seq);
            sqlite3_bind_int64(statement, 2, static_cast<sqlite3_int64>(head.repeats));
            sqlite3_bind_int64(statement, 3, head.last_source);
            sqlite3_bind_int64(statement, 4, head.last_line);
            sqlite3_bind_int64(statement, 5, head.last_time_us);
            step_done(m_db, m_name, statement);
        }
        if (head.expiry_changed) {
            auto* statement = m_update_expiry.get();
            sqlite3_reset(statement);
            sqlite3_bind_int64(statement, 1, seq);
            sqlite3_bind_int64(statement, 2, head.expires_us);
            step_done(m_db, m_name, statement);
        }
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
    std::string path = step_row(lookup, m_name)
                           ? reinterpret_cast<const char*>(sqlite3_column_text(lookup, 0))
                           : std::string("?");
    sqlite3_reset(lookup);
    return m_source_paths.emplace(id, std::move(path)).first->second;
}

} // namespace idem::store::detail
