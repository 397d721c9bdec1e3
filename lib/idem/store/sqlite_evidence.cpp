#include "idem/store/detail/sqlite_evidence.hpp"

#include "idem/store/detail/sqlite_support.hpp"

#include <cstring>
#include <fmt/format.h>

namespace idem::store::detail {

void read_fingerprint_records(sqlite3* db, const std::string& store_name, std::string_view scope,
                              const std::function<void(const FingerprintRecord&)>& visit) {
    Statement rows(db,
                   "SELECT log.fingerprint, log.kind, log.event_time_us, sources.path, log.line "
                   "FROM fingerprint_log AS log JOIN sources ON sources.id = log.source "
                   "WHERE log.scope = ?1 AND log.kind IN (1, 2) ORDER BY log.seq",
                   store_name);
    sqlite3_bind_text(rows.get(), 1, scope.data(), static_cast<int>(scope.size()), SQLITE_STATIC);
    FingerprintRecord record;
    int result = SQLITE_ROW;
    while ((result = sqlite3_step(rows.get())) == SQLITE_ROW) {
        const auto* bytes = sqlite3_column_blob(rows.get(), 0);
        auto size = static_cast<std::size_t>(sqlite3_column_bytes(rows.get(), 0));
        record.fingerprint = {};
        if (bytes)
            std::memcpy(record.fingerprint.data(), bytes,
                        std::min(size, record.fingerprint.size()));
        record.first = sqlite3_column_int(rows.get(), 1) == 1;
        record.event_time = Timestamp(Duration(sqlite3_column_int64(rows.get(), 2)));
        const auto* path = reinterpret_cast<const char*>(sqlite3_column_text(rows.get(), 3));
        record.source = path ? path : "";
        record.line = static_cast<std::uint64_t>(sqlite3_column_int64(rows.get(), 4));
        visit(record);
    }
    if (result != SQLITE_DONE)
        throw StoreError(fmt::format("store {}: {}", quote(store_name), sqlite3_errmsg(db)));
}

} // namespace idem::store::detail
