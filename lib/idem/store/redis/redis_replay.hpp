#pragma once
// Internal to the Redis store: replay's ledger. A scope's entries lie in
// one hash ("idem:ledger:{SCOPE}", field: the key, value: the entry as
// encode_replay_entry writes it), so that a batch of claims is one Lua
// script, not one per key, and a commit's outcomes one HSET: a scope lives
// on one Cluster master, which a replay, bound by its target's answers,
// keeps far from busy. The previous release kept one hash per key
// ("idem:replay:{SCOPE:KEY}"): a run's first claim moves those into the
// scope's hash, and reading the ledger reads them too until then; once no
// such key is left anywhere, a marker spares every later run the scan.

#include "idem/store/redis/redis_session.hpp"
#include "idem/store/replay_ledger.hpp"

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store::detail {

// "idem:ledger:{SCOPE}".
[[nodiscard]] std::string ledger_key(std::string_view scope);

// An entry as one string: "STATE LEASE_US ATTEMPTS STATUS LATENCY_MS
// PERMANENT UPDATED_US " then owner, error, digest and head, each as
// "LENGTH:BYTES" (a response's head may hold any byte).
[[nodiscard]] std::string encode_replay_entry(const ReplayEntry& entry);
// nullopt: not an entry encode_replay_entry wrote.
[[nodiscard]] std::optional<ReplayEntry> decode_replay_entry(std::string_view key,
                                                             std::string_view text);

// The previous release's layout: "idem:replay:{scope:key}"; scan_pattern
// matches every key of a scope.
[[nodiscard]] std::string replay_key(std::string_view scope, std::string_view key);
[[nodiscard]] std::string replay_scan_pattern(std::string_view scope);
// An entry from the 11 values in HMGET order (state, owner, lease, attempts,
// status, latency, permanent, error, digest, head, updated); nullopt when
// the first (state) is empty, meaning there was no entry.
[[nodiscard]] std::optional<ReplayEntry> replay_entry_from(std::string_view key,
                                                           const std::vector<std::string>& values);

// replay's role: the ledger's claims, leases and outcomes.
class RedisReplayLedger {
public:
    explicit RedisReplayLedger(RedisSession& session) : m_session(session) {}

    std::vector<ReplayClaim> claim(std::string_view scope, const std::vector<std::string>& keys,
                                   std::string_view owner, Timestamp now, Timestamp lease_until,
                                   ReplayRerun rerun);
    void renew_leases(std::string_view scope, const std::vector<std::string>& keys,
                      std::string_view owner, Timestamp lease_until);
    // Queued, and applied in one MULTI/EXEC per slot by the store's commit().
    void save(std::string_view scope, const std::vector<ReplayEntry>& entries);
    void for_each(std::string_view scope, const std::function<void(const ReplayEntry&)>& visit);

private:
    // The previous release's keys of `scope` moved into its hash, once per
    // scope (a marker key says it is done).
    void move_earlier_layout(std::string_view scope);
    // Whether any key of the previous release's layout is left, in any
    // scope: once none is, a marker says so and no run scans for them
    // again (a scan visits every key of every master).
    bool earlier_layout_left();
    void for_each_earlier(std::string_view scope,
                          const std::function<void(const ReplayEntry&)>& visit);

    RedisSession& m_session;
    std::string m_claim_script; // SHA1s of the loaded scripts
    std::string m_renew_script;
    std::set<std::string, std::less<>> m_moved; // scopes move_earlier_layout has seen to
    bool m_none_left = false;                   // earlier_layout_left() found none
};

} // namespace idem::store::detail
