#include "idem/store/sqlite/sqlite_evidence.hpp"

#include "idem/store/sqlite/sqlite_fingerprints.hpp"
#include "idem/store/sqlite/sqlite_support.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>

namespace idem::store::detail {

namespace {

std::string text_column(sqlite3_stmt* statement, int column) {
    const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(statement, column));
    return text ? text : "";
}

} // namespace

// Rows in the order they were claimed; a repeat's scope and fingerprint are
// its first copy's. A first copy with more repeats than were kept is
// followed, at the end, by its latest copy, which says how many were not
// kept in between.
void read_fingerprint_records(sqlite3* db, const std::string& store_name, std::string_view scope,
                              const std::function<void(const FingerprintRecord&)>& visit) {
    Statement rows(db,
                   "SELECT log.seq, log.kind, coalesce(head.fingerprint, log.fingerprint), "
                   "log.event_time_us, sources.path, log.line, log.first_seq, more.repeats, "
                   "more.last_time_us, last.path, more.last_line "
                   "FROM fingerprint_log AS log "
                   "LEFT JOIN fingerprint_log AS head ON log.kind = 2 AND head.seq = log.first_seq "
                   "LEFT JOIN fingerprint_repeats AS more ON log.kind = 1 AND more.seq = log.seq "
                   "JOIN sources ON sources.id = log.source "
                   "LEFT JOIN sources AS last ON last.id = more.last_source "
                   "WHERE log.kind IN (1, 2) AND coalesce(head.scope, log.scope) = ?1 "
                   "ORDER BY log.seq",
                   store_name);
    bind_text(rows.get(), 1, scope);
    struct Latest {
        FingerprintRecord record;
        std::uint64_t repeats = 0, kept = 0;
    };
    std::map<sqlite3_int64, Latest> beyond_kept; // first copies with repeats not all kept
    FingerprintRecord record;
    int result = SQLITE_ROW;
    auto* row = rows.get();
    while ((result = sqlite3_step(row)) == SQLITE_ROW) {
        record.fingerprint = fingerprint_column(row, 2);
        record.first = sqlite3_column_int(row, 1) == 1;
        record.event_time = Timestamp(Duration(sqlite3_column_int64(row, 3)));
        record.source = text_column(row, 4);
        record.line = static_cast<std::uint64_t>(sqlite3_column_int64(row, 5));
        record.copies_not_kept = 0;
        if (record.first) {
            auto repeats = static_cast<std::uint64_t>(sqlite3_column_int64(row, 7));
            if (repeats > k_kept_repeats && sqlite3_column_type(row, 8) != SQLITE_NULL) {
                Latest latest{record, repeats, 0};
                latest.record.first = false;
                latest.record.event_time = Timestamp(Duration(sqlite3_column_int64(row, 8)));
                latest.record.source = text_column(row, 9);
                latest.record.line = static_cast<std::uint64_t>(sqlite3_column_int64(row, 10));
                beyond_kept.insert_or_assign(sqlite3_column_int64(row, 0), std::move(latest));
            }
        } else if (auto found = beyond_kept.find(sqlite3_column_int64(row, 6));
                   found != beyond_kept.end()) {
            ++found->second.kept;
        }
        visit(record);
    }
    if (result != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(store_name), sqlite3_errmsg(db)));
    for (auto& [seq, latest] : beyond_kept) {
        if (latest.repeats <= latest.kept) continue; // every repeat is a row
        latest.record.copies_not_kept = latest.repeats - latest.kept - 1;
        visit(latest.record);
    }
}

} // namespace idem::store::detail
