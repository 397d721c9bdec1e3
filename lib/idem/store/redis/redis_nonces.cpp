#include "idem/store/redis/redis_nonces.hpp"

#include <algorithm>
#include <chrono>

namespace idem::store::detail {

namespace {

std::string nonce_key(std::string_view scope, std::string_view nonce) {
    return fmt::format("idem:nonce:{}:{}", scope, nonce);
}

// KEYS[1] the nonce; ARGV: received_at_us, source, line, window_us,
// keep_ms. Returns {verdict, first_seen_us}: 0 fresh, 1 replay, 2 the
// same record. A value left by an earlier version (a plain string of
// first_seen) reads as a sighting of no known record.
constexpr const char* k_nonce_lua = R"lua(
local first, source, line
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  first = redis.call('GET', KEYS[1])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'first', first)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
else
  local v = redis.call('HMGET', KEYS[1], 'first', 'source', 'line')
  first, source, line = v[1], v[2], v[3]
end
local function keep()
  redis.call('HSET', KEYS[1], 'first', ARGV[1], 'source', ARGV[2], 'line', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {0, tonumber(ARGV[1])}
end
if not first then return keep() end
local at, seen, window = tonumber(ARGV[1]), tonumber(first), tonumber(ARGV[4])
if source == ARGV[2] and line == ARGV[3] and seen == at then return {2, seen} end
if at > seen + window then return keep() end
if at < seen - window then return {0, at} end
if at >= seen then return {1, seen} end
return keep()
)lua";

} // namespace

NonceClaim RedisNonces::claim(std::string_view scope, std::string_view nonce,
                              const NonceSighting& sighting, Duration window,
                              Timestamp keep_until) {
    auto key = nonce_key(scope, nonce);
    auto keep_ms = std::max<long long>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(keep_until - now_utc()).count());
    auto sha = m_session.load_script(m_script, k_nonce_lua);
    // On a replica too before the verdict counts: a nonce lost in a
    // failover would let the same delivery pass again.
    auto reply =
        std::move(m_session.redis()
                      .pipeline({{{"EVALSHA", sha, "1", key,
                                   std::to_string(sighting.received_at.time_since_epoch().count()),
                                   std::string(sighting.source), std::to_string(sighting.line),
                                   std::to_string(window.count()), std::to_string(keep_ms)},
                                  key}},
                                Retry::safe, ErrorReplies::fail, Replicas::wait)
                      .front());
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
        throw m_session.unexpected("a nonce claim");
    NonceClaim claim;
    auto verdict = integer_of(reply->element[0]);
    claim.verdict = verdict == 1   ? NonceVerdict::replay
                    : verdict == 2 ? NonceVerdict::same_record
                                   : NonceVerdict::fresh;
    if (claim.verdict != NonceVerdict::fresh)
        claim.first_seen = Timestamp(Duration(integer_of(reply->element[1])));
    return claim;
}

} // namespace idem::store::detail
