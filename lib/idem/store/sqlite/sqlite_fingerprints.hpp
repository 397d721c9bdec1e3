#pragma once
// Internal to the SQLite store: dedup's fingerprint log (schema v10; v11
// its saved deltas; v12 the slots saved whole in a file beside the store).
// A first copy's row, with its line in fingerprint_repeats once copies came
// after it, is its fingerprint's state (when, where, until when, how many
// copies since and where the latest came from); repeats are rows kept as
// evidence, at most k_kept_repeats per first copy. A process holds the log's
// index (FingerprintSlots: fingerprint -> first copy's row) and reads a row
// only when a slot matches; the index is saved (whole, in a file the next
// process maps; or as the changes since) so the next process catches up on
// the rows after it, instead of reading the log.
//
// Rows are appended by a thread of their own while the caller goes on (see
// serial_worker.hpp); the store's connection is used by one thread at a
// time, so the log drains the appender before it uses it, and reads first
// copies on a read-only connection of its own. The store owns the write
// transaction; these statements run inside it.

#include "idem/store/fingerprints.hpp"
#include "idem/store/sqlite/fingerprint_slots.hpp"
#include "idem/store/sqlite/serial_worker.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::store::detail {

// A first copy's row, as this transaction read or wrote it.
struct FingerprintHead {
    FingerprintBytes fingerprint{};
    sqlite3_int64 first_seen_us = 0, expires_us = 0;
    std::uint64_t repeats = 0;
    sqlite3_int64 source = 0, line = 0;
    sqlite3_int64 last_source = 0, last_line = 0, last_time_us = 0; // 0: no repeat yet
    bool unwritten = false;      // appended with the next batch's rows
    bool changed = false;        // its repeats (or expiry) to be written
    bool expiry_changed = false; // its row's expires_us to be updated in place
};

// This transaction's first copies by row, in one table reused from one
// transaction to the next: a node per row, freed at every commit, had the
// allocator fault its pages back in at every batch. A pointer holds until
// the next insert.
class HeadCache {
public:
    FingerprintHead* find(sqlite3_int64 seq) {
        if (m_slots.empty()) return nullptr;
        auto mask = m_slots.size() - 1;
        for (auto index = static_cast<std::size_t>(seq) & mask;; index = (index + 1) & mask) {
            auto& slot = m_slots[index];
            if (slot.generation != m_generation) return nullptr;
            if (slot.seq == seq) return &slot.head;
        }
    }

    // `seq` must not be in the cache.
    FingerprintHead& insert(sqlite3_int64 seq, const FingerprintHead& head) {
        if ((m_size + 1) * 2 > m_slots.size()) grow();
        auto mask = m_slots.size() - 1;
        auto index = static_cast<std::size_t>(seq) & mask;
        while (m_slots[index].generation == m_generation)
            index = (index + 1) & mask;
        m_slots[index] = {seq, m_generation, head};
        ++m_size;
        return m_slots[index].head;
    }

    void clear() {
        m_size = 0;
        if (++m_generation == 0) { // wrapped: no slot may look current
            for (auto& slot : m_slots)
                slot.generation = 0;
            m_generation = 1;
        }
    }

private:
    struct Slot {
        sqlite3_int64 seq = 0;
        std::uint32_t generation = 0; // current when it is m_generation
        FingerprintHead head;
    };

    void grow() {
        auto old = std::move(m_slots);
        m_slots.assign(std::max<std::size_t>(old.size() * 2, 1024), Slot{});
        m_size = 0;
        for (auto& slot : old)
            if (slot.generation == m_generation) insert(slot.seq, slot.head);
    }

    std::vector<Slot> m_slots; // a power of two, at most half full
    std::size_t m_size = 0;
    std::uint32_t m_generation = 1;
};

// Per scope: the log's index and what this process knows of it.
struct ScopeIndex {
    FingerprintSlots slots;
    sqlite3_int64 last_seq = 0;  // every first copy of the scope up to here is in slots
    sqlite3_int64 saved_seq = 0; // what the saved index covers
    std::uint64_t rows_since_saved = 0;
    std::uint64_t expected = 0;     // claims a run said were coming (room is made for them)
    std::int64_t gc_generation = 0; // the store's, when slots were built
    std::chrono::steady_clock::time_point saved_at = std::chrono::steady_clock::now();
    // Every change to `slots` since saved_seq, in seq order: saved as a
    // delta (fingerprint_index_delta), so the next process replays them
    // instead of reading those rows of the log. Kept while the saved
    // deltas and these are few (SqliteFingerprintLog::delta_limit); past
    // that they are dropped and the next save writes the slots whole.
    std::vector<FingerprintSlots::Change> changes;
    bool changes_kept = true;
    std::uint64_t saved_changes = 0; // in the saved deltas after the saved slots
    // The slots' capacity as loaded with the deltas: once they grew past
    // it, every process replaying the deltas would grow them again
    // (zeroing the larger table is most of an open), so they are saved whole.
    std::size_t loaded_capacity = 0;
    // The store names saved slots this process could not use (their file is
    // gone or not theirs): it saves them whole, lest every process after it
    // read the log again.
    bool saved_unusable = false;
    bool looked = false;  // loaded, caught up, expired rows reclaimed
    bool current = false; // caught up within the open transaction
    // This transaction's first copies by row: read when a slot matched, or
    // written. Cleared at commit, when other processes may change them.
    HeadCache heads;
};

// How many of the fingerprints a run says are coming room is made for
// ahead: all of them in a table of its own; none above saved slots, where a
// rerun of what the store holds adds nothing, and the table above them
// (this process's changes only) grows as they come. Reserved there, a
// rerun of 50M records zeroed 512 MiB it never used.
inline std::size_t room_ahead(const FingerprintSlots& slots, std::uint64_t expected) {
    return slots.has_saved() ? 0 : static_cast<std::size_t>(expected);
}

class SqliteFingerprintLog {
public:
    SqliteFingerprintLog(sqlite3* db, const std::string& store_name);
    ~SqliteFingerprintLog();

    // Waits for the appender; rethrows its failure (StoreError).
    void drain() { m_appender.drain(); }

    // A process's first look at a scope: the saved index if it is still
    // good, then the rows after it. Returns whether expired first copies
    // are many enough to collect now: at least 10,000 and at least half, as
    // a sample of first copies says.
    bool first_look(std::string_view scope, ScopeIndex& index, Timestamp now);
    // Builds the index again from the log (after garbage collection).
    void rebuild(std::string_view scope, ScopeIndex& index);
    // Applies first copies other processes appended since this one looked.
    void catch_up(std::string_view scope, ScopeIndex& index);

    // Decides each claim and appends its rows later (within the open
    // transaction). `index` must outlive the next drain().
    std::vector<FingerprintResult> claim(std::string_view scope, ScopeIndex& index,
                                         const std::vector<FingerprintClaim>& claims,
                                         Timestamp now);
    void release(std::string_view scope, ScopeIndex& index, const FingerprintBytes& fingerprint,
                 Timestamp now);

    // Saves what the index covers beyond the saved one, when no garbage
    // was collected since it was built: the changes since, as a delta after
    // the saved slots and deltas, while they are few; else the slots whole,
    // in place of the saved ones. When it only covers more rows, not more
    // first copies, moves the saved mark. Within a transaction.
    void save_index(std::string_view scope, ScopeIndex& index);
    // How many changes the deltas after saved slots may hold, together: a
    // quarter of the fingerprints (a process keeps its changes in memory,
    // 16 bytes each, and the next one probes once for each), at least 4,096.
    // Where the index was saved whole once the rows since were a quarter of
    // it, a quarter is the same number of whole saves.
    static std::uint64_t delta_limit(const ScopeIndex& index);
    // Rows collected: the store's garbage generation moves on and saved
    // indexes go (their slots would point at rows that are gone).
    void after_collecting_garbage();
    // The transaction ended: rows read in it may change.
    void transaction_ended();

    // Input names are stored once, in sources; ids are cached per run.
    sqlite3_int64 source_id(std::string_view path);
    const std::string& source_path(sqlite3_int64 id);

private:
    struct Row; // a row to append
    // A claimed batch's rows, and the first copies it changed, to the appender.
    void append_batch(std::string_view scope, ScopeIndex& index, std::vector<Row> rows,
                      std::vector<sqlite3_int64> changed);
    const FingerprintHead* head_at(ScopeIndex& index, sqlite3_int64 seq,
                                   const FingerprintBytes& fingerprint);
    FingerprintHead* read_head(ScopeIndex& index, sqlite3_int64 seq);
    void read_heads_ahead(ScopeIndex& index, const std::vector<FingerprintClaim>& claims);
    bool is_first_copy_of(ScopeIndex& index, sqlite3_int64 seq,
                          const FingerprintBytes& fingerprint);
    void put(std::string_view scope, ScopeIndex& index, const FingerprintBytes& fingerprint,
             FingerprintSlots::Place place, sqlite3_int64 seq);
    sqlite3_int64 next_seq();
    std::int64_t gc_generation();
    bool load_saved_index(std::string_view scope, ScopeIndex& index);
    bool apply_saved_deltas(std::string_view scope, ScopeIndex& index);
    // Where the saved slots and deltas end, as a process opening now would
    // load them: the last row they cover, the changes in the deltas, and
    // the delta that ends them (0: the slots, or nothing saved).
    struct SavedChain {
        sqlite3_int64 end = 0;
        std::uint64_t changes = 0;
        sqlite3_int64 last_delta = 0;
        bool slots = false;
    };
    SavedChain saved_chain(std::string_view scope, std::int64_t generation);
    void save_delta(std::string_view scope, ScopeIndex& index, const SavedChain& chain);
    bool save_slots(std::string_view scope, ScopeIndex& index);
    void append_rows(std::string_view scope, const std::vector<Row>& rows);
    void update_heads(const std::vector<std::pair<sqlite3_int64, FingerprintHead>>& heads);

    // A read-only connection of its own reads first copies while the
    // appender writes on the store's: within a write transaction every row
    // this process wrote or changed is in the head cache, and the rest is
    // as committed when the transaction began, which is what a read
    // transaction begun after the write lock sees.
    struct Reader {
        UniqueSqlite connection;
        sqlite3* db = nullptr; // connection's
        bool reading = false;  // a read transaction is open
        explicit Reader(const std::string& path);
        ~Reader();
        Reader(const Reader&) = delete;
        Reader& operator=(const Reader&) = delete;
    };
    sqlite3* reader(); // within a read transaction begun in this write transaction

    sqlite3* m_db;
    std::string m_name;
    std::string m_path; // the store's file; its saved slots lie beside it
    Reader m_reader;
    Statement m_append;
    Statement m_append_many;
    Statement m_update_repeats;
    Statement m_update_expiry;
    Statement m_read_head;
    Statement m_read_heads_between;
    Statement m_catch_up;
    Statement m_insert_source;
    Statement m_source_id;
    Statement m_source_path;
    std::unordered_map<std::string, sqlite3_int64> m_source_ids;
    std::string_view m_last_source_path; // a key of m_source_ids
    sqlite3_int64 m_last_source_id = 0;
    std::unordered_map<sqlite3_int64, std::string> m_source_paths;
    sqlite3_int64 m_next_seq = 0; // within the open transaction; 0: not read yet
    // A batch's rows go to the appender and come back for the next batch:
    // freed and allocated anew, their pages were faulted in at every batch.
    std::mutex m_spare_mutex;
    std::vector<Row> m_spare_rows;
    std::vector<sqlite3_int64> m_wanted; // read_heads_ahead's, kept for its capacity
    // Per claim of the batch, whether a saved slot holds its 32 bits (as
    // read_heads_ahead found): when none does, claim() does not probe the
    // saved slots again, a second miss in a table of the store's size.
    std::vector<char> m_saved_slot_holds_claim;
    // catch_up's rows, a batch at a time, so their slots are asked for ahead.
    std::vector<std::pair<sqlite3_int64, FingerprintBytes>> m_caught_up;
    SerialWorker m_appender; // last: stopped first, while the statements it uses exist
};

// Starts over from what the index now covers: nothing changed since.
inline void mark_saved(ScopeIndex& index, std::uint64_t saved_changes) {
    index.saved_seq = index.last_seq;
    index.rows_since_saved = 0;
    index.changes.clear();
    index.changes_kept = true;
    index.saved_changes = saved_changes;
}

} // namespace idem::store::detail
