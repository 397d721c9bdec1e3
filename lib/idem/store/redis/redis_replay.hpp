#pragma once
// Internal to the Redis store: replay's ledger, one hash per key. The claim
// is one Lua script per key, so it is atomic, and the hash tag keeps each
// script on one Redis Cluster slot.

#include "idem/store/redis/redis_session.hpp"
#include "idem/store/replay_ledger.hpp"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace idem::store::detail {

// "idem:replay:{scope:key}"; scan_pattern matches every key of a scope.
[[nodiscard]] std::string replay_key(std::string_view scope, std::string_view key);
[[nodiscard]] std::string replay_scan_pattern(std::string_view scope);

// ARGV: owner, now_us, lease_until_us, rerun (0 resume, 1 retry failed,
// 2 force). Returns {granted, the previous entry's fields in
// k_replay_fields order ("" when absent)}. The rule is may_claim_replay's.
inline constexpr const char* k_replay_claim_lua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'state', 'owner', 'lease', 'attempts', 'status', 'latency',
                     'permanent', 'error', 'digest', 'head', 'updated')
local grant
if not v[1] then grant = true
elseif v[1] == '0' then grant = (tonumber(v[3]) <= tonumber(ARGV[2]))
elseif v[1] == '1' then grant = (ARGV[4] == '2')
else grant = (v[7] ~= '1') or (ARGV[4] ~= '0') end
if grant and v[4] then
  redis.call('HSET', KEYS[1], 'state', '0', 'owner', ARGV[1], 'lease', ARGV[3], 'updated', ARGV[2])
elseif grant then
  redis.call('HSET', KEYS[1], 'state', '0', 'owner', ARGV[1], 'lease', ARGV[3], 'updated', ARGV[2],
             'attempts', '0', 'status', '0', 'latency', '0', 'permanent', '0', 'error', '',
             'digest', '', 'head', '')
end
local out = {grant and 1 or 0}
for i = 1, 11 do out[i + 1] = v[i] or '' end
return out
)lua";

// ARGV: owner, lease_until_us. Extends a lease only its owner still holds.
inline constexpr const char* k_replay_renew_lua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'state', 'owner')
if v[1] == '0' and v[2] == ARGV[1] then redis.call('HSET', KEYS[1], 'lease', ARGV[2]) end
return 0
)lua";

// HSET arguments (after the key) for a whole entry.
[[nodiscard]] std::vector<std::string> replay_fields(const ReplayEntry& entry);

// An entry from the 11 values in HMGET order; nullopt when the first
// (state) is empty, meaning there was no entry.
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
    // Queued, and applied in one MULTI/EXEC by the store's commit().
    void save(std::string_view scope, const std::vector<ReplayEntry>& entries);
    void for_each(std::string_view scope, const std::function<void(const ReplayEntry&)>& visit);

private:
    RedisSession& m_session;
    std::string m_claim_script; // SHA1 of the loaded script
    std::string m_renew_script;
};

} // namespace idem::store::detail
