#include "idem/store/sqlite/sqlite_replay.hpp"

#include <fmt/format.h>

namespace idem::store::detail {

namespace {

constexpr const char* k_ledger_columns =
    "key, state, owner, lease_until_us, attempts, status, latency_ms, "
    "permanent, error, response_digest, response_head, updated_us";

std::int64_t micros(Timestamp at) {
    return at.time_since_epoch().count();
}

ReplayEntry entry_of(sqlite3_stmt* statement) {
    ReplayEntry entry;
    entry.key = column_bytes(statement, 0);
    entry.state = static_cast<ReplayState>(sqlite3_column_int(statement, 1));
    entry.owner = column_bytes(statement, 2);
    entry.lease_until = Timestamp(Duration(sqlite3_column_int64(statement, 3)));
    entry.attempts = static_cast<std::uint32_t>(sqlite3_column_int64(statement, 4));
    entry.status = sqlite3_column_int(statement, 5);
    entry.latency_ms = sqlite3_column_int64(statement, 6);
    entry.permanent = sqlite3_column_int(statement, 7) != 0;
    entry.error = column_bytes(statement, 8);
    entry.response_digest = column_bytes(statement, 9);
    entry.response_head = column_bytes(statement, 10);
    entry.updated_at = Timestamp(Duration(sqlite3_column_int64(statement, 11)));
    return entry;
}

} // namespace

SqliteReplayLedger::SqliteReplayLedger(sqlite3* db, const std::string& store_name)
    : m_db(db), m_name(store_name),
      m_find(db,
             fmt::format("SELECT {} FROM replay_ledger WHERE scope = ?1 AND key = ?2",
                         k_ledger_columns)
                 .c_str(),
             store_name),
      m_save(db,
             fmt::format("INSERT OR REPLACE INTO replay_ledger(scope, {}) VALUES(?1, ?2, ?3, ?4, "
                         "?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                         k_ledger_columns)
                 .c_str(),
             store_name),
      m_renew(db,
              "UPDATE replay_ledger SET lease_until_us = ?4 WHERE scope = ?1 AND key = ?2 AND "
              "owner = ?3 AND state = 0",
              store_name),
      m_all(db,
            fmt::format("SELECT {} FROM replay_ledger WHERE scope = ?1 ORDER BY key",
                        k_ledger_columns)
                .c_str(),
            store_name) {}

void SqliteReplayLedger::fail() {
    throw StoreError(fmt::format("store {}: {}", quote(m_name), sqlite3_errmsg(m_db)));
}

std::optional<ReplayEntry> SqliteReplayLedger::find(std::string_view scope, std::string_view key) {
    auto* statement = m_find.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, scope);
    bind_text(statement, 2, key);
    int result = sqlite3_step(statement);
    std::optional<ReplayEntry> found;
    if (result == SQLITE_ROW) found = entry_of(statement);
    sqlite3_reset(statement);
    if (result != SQLITE_ROW && result != SQLITE_DONE) fail();
    return found;
}

void SqliteReplayLedger::save_one(std::string_view scope, const ReplayEntry& entry) {
    auto* statement = m_save.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, scope);
    bind_text(statement, 2, entry.key);
    sqlite3_bind_int(statement, 3, static_cast<int>(entry.state));
    bind_text(statement, 4, entry.owner);
    sqlite3_bind_int64(statement, 5, micros(entry.lease_until));
    sqlite3_bind_int64(statement, 6, entry.attempts);
    sqlite3_bind_int(statement, 7, entry.status);
    sqlite3_bind_int64(statement, 8, entry.latency_ms);
    sqlite3_bind_int(statement, 9, entry.permanent ? 1 : 0);
    bind_text(statement, 10, entry.error);
    bind_text(statement, 11, entry.response_digest);
    sqlite3_bind_blob(statement, 12, entry.response_head.empty() ? "" : entry.response_head.data(),
                      static_cast<int>(entry.response_head.size()), SQLITE_STATIC);
    sqlite3_bind_int64(statement, 13, micros(entry.updated_at));
    int result = sqlite3_step(statement);
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
}

std::vector<ReplayClaim> SqliteReplayLedger::claim(std::string_view scope,
                                                   const std::vector<std::string>& keys,
                                                   std::string_view owner, Timestamp now,
                                                   Timestamp lease_until, ReplayRerun rerun) {
    std::vector<ReplayClaim> claims;
    claims.reserve(keys.size());
    for (const auto& key : keys) {
        auto& claim = claims.emplace_back();
        claim.previous = find(scope, key);
        claim.granted = may_claim_replay(claim.previous, now, rerun);
        if (!claim.granted) continue;
        ReplayEntry entry = claim.previous.value_or(ReplayEntry{});
        entry.key = key;
        entry.state = ReplayState::in_progress;
        entry.owner = owner;
        entry.lease_until = lease_until;
        entry.updated_at = now;
        save_one(scope, entry);
    }
    return claims;
}

void SqliteReplayLedger::renew(std::string_view scope, const std::vector<std::string>& keys,
                               std::string_view owner, Timestamp lease_until) {
    auto* statement = m_renew.get();
    for (const auto& key : keys) {
        sqlite3_reset(statement);
        bind_text(statement, 1, scope);
        bind_text(statement, 2, key);
        bind_text(statement, 3, owner);
        sqlite3_bind_int64(statement, 4, micros(lease_until));
        int result = sqlite3_step(statement);
        sqlite3_reset(statement);
        if (result != SQLITE_DONE) fail();
    }
}

void SqliteReplayLedger::save(std::string_view scope, const std::vector<ReplayEntry>& entries) {
    for (const auto& entry : entries)
        save_one(scope, entry);
}

void SqliteReplayLedger::for_each(std::string_view scope,
                                  const std::function<void(const ReplayEntry&)>& visit) {
    auto* statement = m_all.get();
    sqlite3_reset(statement);
    bind_text(statement, 1, scope);
    int result = SQLITE_ROW;
    while ((result = sqlite3_step(statement)) == SQLITE_ROW)
        visit(entry_of(statement));
    sqlite3_reset(statement);
    if (result != SQLITE_DONE) fail();
}

} // namespace idem::store::detail
