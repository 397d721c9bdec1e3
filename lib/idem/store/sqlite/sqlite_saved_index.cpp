// The saved index of a SQLite store's fingerprints (docs/stores.md): the
// slots saved whole in a file beside the store, the deltas saved after
// them, and when each is written. A process opening the store maps the
// slots and replays the deltas instead of reading the whole log.

#include "idem/store/detail/fingerprint_table.hpp"
#include "idem/store/sqlite/saved_slots_file.hpp"
#include "idem/store/sqlite/sqlite_fingerprints.hpp"

#include <algorithm>
#include <cstring>
#include <fmt/format.h>
#include <optional>

namespace idem::store::detail {

// The slots saved whole, mapped from their file (read on the reader's
// connection, as the deltas after them are). A row whose file is missing
// or not the one it names leaves the index empty, and the log is read.
bool SqliteFingerprintLog::load_saved_index(std::string_view scope, ScopeIndex& index) {
    Statement row(reader(),
                  "SELECT covers_seq, gc_generation, capacity, entries, base, token "
                  "FROM fingerprint_index WHERE scope = ?1",
                  m_name);
    bind_text(row.get(), 1, scope);
    std::optional<SavedSlots> saved;
    SavedSlotsIdentity identity;
    if (step_row(row.get(), m_name)) {
        auto* columns = row.get();
        identity.covers_seq = sqlite3_column_int64(columns, 0);
        identity.gc_generation = sqlite3_column_int64(columns, 1);
        identity.capacity = static_cast<std::uint64_t>(sqlite3_column_int64(columns, 2));
        identity.entries = static_cast<std::uint64_t>(sqlite3_column_int64(columns, 3));
        identity.base = sqlite3_column_int64(columns, 4);
        identity.token = static_cast<std::uint64_t>(sqlite3_column_int64(columns, 5));
        if (identity.gc_generation == index.gc_generation && identity.covers_seq >= 0)
            saved = map_saved_slots(m_path, identity);
        index.saved_unusable = !saved;
    }
    if (saved) {
        index.slots = FingerprintSlots(std::move(*saved), identity.base);
        index.last_seq = identity.covers_seq;
    } else {
        index.slots = FingerprintSlots();
        index.last_seq = 0;
    }
    mark_saved(index, 0);
    return saved.has_value();
}

// The deltas saved after the loaded slots (or after nothing, from row 0),
// replayed in order. A delta written by a process that had not seen a later
// one overlaps it: its changes up to where the index already is are passed
// over (a change is the same whichever process made it: the rows decide).
// Stops at a gap, and the log is read from there. False when a change
// does not fit the slots: they are then not to be trusted.
bool SqliteFingerprintLog::apply_saved_deltas(std::string_view scope, ScopeIndex& index) {
    auto* db = reader();
    Statement deltas(db,
                     "SELECT after_seq, covers_seq, gc_generation, base, length(changes), rowid "
                     "FROM fingerprint_index_delta WHERE scope = ?1 ORDER BY after_seq, covers_seq",
                     m_name);
    bind_text(deltas.get(), 1, scope);
    constexpr std::size_t k_change_bytes = sizeof(FingerprintSlots::Change);
    constexpr std::size_t k_changes_per_read = std::size_t{1} << 20;
    // Room for every change to come (and the claims the run expects, see
    // room_ahead), made once: growing the table as they came zeroed and
    // refilled it each time.
    {
        Statement coming(db,
                         "SELECT coalesce(sum(length(changes)), 0) / 16 FROM "
                         "fingerprint_index_delta WHERE scope = ?1 AND covers_seq > ?2",
                         m_name);
        bind_text(coming.get(), 1, scope);
        sqlite3_bind_int64(coming.get(), 2, index.last_seq);
        if (step_row(coming.get(), m_name))
            index.slots.reserve(index.slots.size() + room_ahead(index.slots, index.expected) +
                                static_cast<std::size_t>(sqlite3_column_int64(coming.get(), 0)));
    }
    std::vector<FingerprintSlots::Change> buffer; // a part of a delta at a time
    std::uint64_t replayed = 0;
    while (step_row(deltas.get(), m_name)) {
        auto* row = deltas.get();
        auto after = sqlite3_column_int64(row, 0), covers = sqlite3_column_int64(row, 1);
        auto bytes = static_cast<std::size_t>(sqlite3_column_int64(row, 4));
        if (covers <= index.last_seq) continue;
        if (after > index.last_seq || sqlite3_column_int64(row, 2) != index.gc_generation ||
            sqlite3_column_int64(row, 3) != index.slots.base() || bytes % k_change_bytes != 0)
            break;
        auto blob =
            open_blob(db, "fingerprint_index_delta", "changes", sqlite3_column_int64(row, 5));
        if (!blob) break;
        bool fits = true;
        for (std::size_t offset = 0; fits && offset < bytes;) {
            auto count = std::min(k_changes_per_read, (bytes - offset) / k_change_bytes);
            buffer.resize(count);
            if (sqlite3_blob_read(blob.get(), buffer.data(),
                                  static_cast<int>(count * k_change_bytes),
                                  static_cast<int>(offset)) != SQLITE_OK)
                return false;
            offset += count * k_change_bytes;
            // Changes up to where the index is are in it already.
            auto first =
                std::partition_point(buffer.begin(), buffer.end(), [&](const auto& change) {
                    return index.slots.seq_of(change) <= index.last_seq;
                });
            auto fresh = static_cast<std::size_t>(buffer.end() - first);
            fits = fresh == 0 || index.slots.apply(&*first, fresh);
            replayed += fresh;
        }
        blob.reset();
        if (!fits) return false;
        index.last_seq = covers;
    }
    mark_saved(index, replayed);
    return true;
}

SqliteFingerprintLog::SavedChain SqliteFingerprintLog::saved_chain(std::string_view scope,
                                                                   std::int64_t generation) {
    SavedChain chain;
    {
        Statement slots(m_db,
                        "SELECT covers_seq FROM fingerprint_index WHERE scope = ?1 "
                        "AND gc_generation = ?2",
                        m_name);
        bind_text(slots.get(), 1, scope);
        sqlite3_bind_int64(slots.get(), 2, generation);
        if (step_row(slots.get(), m_name)) {
            chain.end = sqlite3_column_int64(slots.get(), 0);
            chain.slots = true;
        }
    }
    Statement deltas(m_db,
                     "SELECT after_seq, covers_seq, length(changes), rowid FROM "
                     "fingerprint_index_delta WHERE scope = ?1 AND gc_generation = ?2 "
                     "ORDER BY after_seq, covers_seq",
                     m_name);
    bind_text(deltas.get(), 1, scope);
    sqlite3_bind_int64(deltas.get(), 2, generation);
    while (step_row(deltas.get(), m_name)) {
        auto after = sqlite3_column_int64(deltas.get(), 0);
        auto covers = sqlite3_column_int64(deltas.get(), 1);
        if (covers <= chain.end) continue;
        if (after > chain.end) break;
        chain.end = covers;
        // Overlapping changes are counted twice: the limit comes sooner.
        chain.changes += static_cast<std::uint64_t>(sqlite3_column_int64(deltas.get(), 2)) /
                         sizeof(FingerprintSlots::Change);
        chain.last_delta = sqlite3_column_int64(deltas.get(), 3);
    }
    return chain;
}

void SqliteFingerprintLog::save_index(std::string_view scope, ScopeIndex& index) {
    m_appender.drain();
    bool nothing_held = index.slots.capacity() == 0 && !index.slots.has_saved();
    if (!index.looked || index.last_seq <= index.saved_seq || nothing_held ||
        gc_generation() != index.gc_generation)
        return;
    auto chain = saved_chain(scope, index.gc_generation);
    // Another process saved as far; unless what this one found saved could
    // not be used (its file is gone), and every next process would read
    // the log again.
    if (chain.end >= index.last_seq && !index.saved_unusable) return;
    // The changes since this process's saved mark, beyond what the store
    // already has; they are a delta only when they follow on from it.
    auto first_unsaved =
        std::partition_point(index.changes.begin(), index.changes.end(), [&](const auto& change) {
            return index.slots.seq_of(change) <= chain.end;
        });
    auto unsaved = static_cast<std::uint64_t>(index.changes.end() - first_unsaved);
    bool follows_on =
        index.changes_kept && chain.end >= index.saved_seq &&
        chain.changes + unsaved <= delta_limit(index) &&
        (index.slots.has_saved() || index.slots.capacity() <= index.loaded_capacity) &&
        !index.saved_unusable;
    if (follows_on && unsaved == 0 && (chain.slots || chain.last_delta != 0)) {
        // Only repeats (or other scopes' rows) since: what is saved covers
        // the rows up to here.
        Statement cover(m_db,
                        chain.last_delta != 0
                            ? "UPDATE fingerprint_index_delta SET covers_seq = ?2 WHERE rowid = ?3"
                            : "UPDATE fingerprint_index SET covers_seq = ?2 WHERE scope = ?1",
                        m_name);
        bind_text(cover.get(), 1, scope);
        sqlite3_bind_int64(cover.get(), 2, index.last_seq);
        if (chain.last_delta != 0) sqlite3_bind_int64(cover.get(), 3, chain.last_delta);
        step_done(m_db, m_name, cover.get());
        mark_saved(index, chain.changes);
    } else if (follows_on) {
        Statement insert(m_db,
                         "INSERT OR REPLACE INTO fingerprint_index_delta(scope, after_seq, "
                         "covers_seq, gc_generation, base, changes) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
                         m_name);
        auto* statement = insert.get();
        bind_text(statement, 1, scope);
        sqlite3_bind_int64(statement, 2, chain.end);
        sqlite3_bind_int64(statement, 3, index.last_seq);
        sqlite3_bind_int64(statement, 4, index.gc_generation);
        sqlite3_bind_int64(statement, 5, index.slots.base());
        if (unsaved == 0)
            sqlite3_bind_zeroblob(statement, 6, 0); // a null pointer would bind NULL
        else
            sqlite3_bind_blob64(statement, 6, &*first_unsaved,
                                unsaved * sizeof(FingerprintSlots::Change), SQLITE_STATIC);
        step_done(m_db, m_name, statement);
        mark_saved(index, chain.changes + unsaved);
    } else if (save_slots(scope, index)) {
        mark_saved(index, 0);
        index.loaded_capacity = index.slots.capacity();
        index.saved_unusable = false;
    }
    index.saved_at = std::chrono::steady_clock::now();
}

// The slots whole, in a file of their own named by the scope's row, in
// place of the saved ones and of the deltas they cover: writing them costs
// the index's size (512 MiB at 50M fingerprints), so they are written when
// the deltas would grow past delta_limit. Files no row names (an earlier
// save's, or one a process died writing) go first; the one this replaces
// stays until the next save, for a process that read its row and has yet
// to map it. False when the file cannot be written: nothing is saved.
bool SqliteFingerprintLog::save_slots(std::string_view scope, ScopeIndex& index) {
    if (m_path.empty()) return false;
    std::vector<std::uint64_t> named;
    {
        Statement tokens(m_db, "SELECT token FROM fingerprint_index", m_name);
        while (step_row(tokens.get(), m_name))
            named.push_back(static_cast<std::uint64_t>(sqlite3_column_int64(tokens.get(), 0)));
    }
    remove_saved_slots_except(m_path, named);
    const auto& slots = index.slots;
    SavedSlotsIdentity identity;
    identity.token = new_saved_slots_token();
    identity.covers_seq = index.last_seq;
    identity.gc_generation = index.gc_generation;
    identity.capacity = slots.has_saved() ? slots.merged_capacity() : slots.capacity();
    identity.entries = slots.size();
    identity.base = slots.base();
    bool written = false;
    if (!slots.has_saved()) {
        written = write_saved_slots(m_path, identity, slots.data());
    } else {
        // Merged as written; in memory only in the case write_merged
        // cannot stream (a cluster wrapping past its first piece).
        written = write_saved_slots(m_path, identity, [&](const FingerprintSlots::PutSlots& put) {
            return slots.write_merged(put);
        });
        if (!written) {
            if (auto merged = slots.merged())
                written = write_saved_slots(m_path, identity, merged->data());
        }
    }
    if (!written) return false;
    Statement forget_deltas(
        m_db, "DELETE FROM fingerprint_index_delta WHERE scope = ?1 AND covers_seq <= ?2", m_name);
    bind_text(forget_deltas.get(), 1, scope);
    sqlite3_bind_int64(forget_deltas.get(), 2, index.last_seq);
    step_done(m_db, m_name, forget_deltas.get());
    Statement insert(m_db,
                     "INSERT OR REPLACE INTO fingerprint_index(scope, covers_seq, gc_generation, "
                     "capacity, entries, base, token) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
                     m_name);
    auto* statement = insert.get();
    bind_text(statement, 1, scope);
    sqlite3_bind_int64(statement, 2, identity.covers_seq);
    sqlite3_bind_int64(statement, 3, identity.gc_generation);
    sqlite3_bind_int64(statement, 4, static_cast<sqlite3_int64>(identity.capacity));
    sqlite3_bind_int64(statement, 5, static_cast<sqlite3_int64>(identity.entries));
    sqlite3_bind_int64(statement, 6, identity.base);
    sqlite3_bind_int64(statement, 7, static_cast<sqlite3_int64>(identity.token));
    step_done(m_db, m_name, statement);
    return true;
}

} // namespace idem::store::detail
