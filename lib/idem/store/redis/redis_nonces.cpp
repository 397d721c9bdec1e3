#include "idem/store/redis/redis_nonces.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <unordered_map>

namespace idem::store::detail {

namespace {

std::string nonce_key(std::string_view scope, std::string_view nonce) {
    return fmt::format("idem:nonce:{}:{}", scope, nonce);
}

// What a nonce's key holds: "FIRST_US LINE SOURCE", the source last (it
// may hold spaces).
std::string encode_entry(const NonceSighting& sighting) {
    return fmt::format("{} {} {}", sighting.received_at.time_since_epoch().count(), sighting.line,
                       sighting.source);
}

// An entry read back; an earlier idem's plain "FIRST_US" is a sighting of
// no known record. nullopt: not an entry idem writes.
std::optional<NonceEntry> decode_entry(std::string_view text) {
    NonceEntry entry;
    long long first = 0;
    const auto* end = text.data() + text.size();
    auto [after_first, error] = std::from_chars(text.data(), end, first);
    if (error != std::errc() || after_first == text.data()) return std::nullopt;
    entry.first_seen = Timestamp(Duration(first));
    if (after_first == end) return entry;
    if (*after_first != ' ') return std::nullopt;
    auto [after_line, line_error] = std::from_chars(after_first + 1, end, entry.line);
    if (line_error != std::errc() || after_line == end || *after_line != ' ') return std::nullopt;
    entry.source.assign(after_line + 1, end);
    return entry;
}

// KEYS[1] the nonce; ARGV: received_at_us, source, line, window_us,
// keep_ms. Returns {verdict, first_seen_us}: 0 fresh, 1 replay, 2 the
// same record. The rule of judge_nonce(), for the claims a batch could
// not settle from what its SET met: a kept entry to replace (judged again
// here, atomically, against what the key holds by now), and an entry an
// earlier idem kept as a hash (first, source, line) or as a plain
// first_seen, which becomes the string form. A key of another type is
// not idem's: refused.
constexpr const char* k_nonce_lua = R"lua(
local first, source, line
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' then
  local v = redis.call('GET', KEYS[1])
  first, line, source = string.match(v, '^(%-?%d+) (%d+) (.*)$')
  if not first then first = v end
elseif t == 'hash' then
  local v = redis.call('HMGET', KEYS[1], 'first', 'source', 'line')
  first, source, line = v[1], v[2], v[3]
  redis.call('DEL', KEYS[1])
  if first then
    redis.call('SET', KEYS[1], first .. ' ' .. (line or '0') .. ' ' .. (source or ''), 'PX', ARGV[5])
  end
elseif t ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' is a ' .. t .. ', not a nonce idem keeps')
end
local function keep()
  redis.call('SET', KEYS[1], ARGV[1] .. ' ' .. ARGV[3] .. ' ' .. ARGV[2], 'PX', ARGV[5])
  return {0, tonumber(ARGV[1])}
end
local at, seen, window = tonumber(ARGV[1]), tonumber(first), tonumber(ARGV[4])
if not seen then return keep() end
if source == ARGV[2] and line == ARGV[3] and seen == at then return {2, seen} end
if at > seen + window then return keep() end
if at < seen - window then return {0, at} end
if at >= seen then return {1, seen} end
return keep()
)lua";

long long keep_ms_of(Timestamp keep_until) {
    return std::max<long long>(
        1, std::chrono::duration_cast<std::chrono::milliseconds>(keep_until - now_utc()).count());
}

} // namespace

NonceClaim RedisNonces::claim(std::string_view scope, std::string_view nonce,
                              const NonceSighting& sighting, Duration window,
                              Timestamp keep_until) {
    NonceRequest request{scope, nonce, sighting, window, keep_until, {}};
    return claim_batch({&request, 1}).front();
}

// A new nonce is one `SET NX PX GET`, pipelined for the whole batch; an
// entry already there comes back with the reply and is judged here by
// judge_nonce(). No pipeline holds two commands on one key: a cluster
// that refuses part of a pipeline (CLUSTERDOWN during a failover) has the
// refused part sent again after the rest ran, so a later copy of a
// delivery could meet an empty key before its first copy and be called
// fresh. So the first claim of each key takes the SET; a later claim of
// the same key in the batch is judged here against the entry the first
// left, and runs the script only to replace it (an earlier sighting, or
// one past the window), one round of scripts per claim of a key.
std::vector<NonceClaim> RedisNonces::claim_batch(std::span<const NonceRequest> requests) {
    std::vector<NonceClaim> claims(requests.size());
    if (requests.empty()) return claims;
    std::vector<std::string> keys;
    keys.reserve(requests.size());
    for (const auto& request : requests)
        keys.push_back(nonce_key(request.scope, request.nonce));
    // Per key, in batch order: its claims, and what the key holds as far as
    // this batch knows (nullopt: a script is to say).
    struct KeyClaims {
        std::vector<std::size_t> claims;
        std::size_t settled = 0; // claims[0, settled) are judged
        std::optional<NonceEntry> kept;
    };
    std::unordered_map<std::string_view, KeyClaims> by_key;
    std::vector<KeyClaims*> order; // keys in the order first met
    std::vector<RoutedCommand> sets;
    for (std::size_t i = 0; i < requests.size(); ++i) {
        auto [entry, first] = by_key.try_emplace(keys[i]);
        entry->second.claims.push_back(i);
        if (!first) continue;
        order.push_back(&entry->second);
        sets.push_back({{"SET", keys[i], encode_entry(requests[i].sighting), "NX", "PX",
                         std::to_string(keep_ms_of(requests[i].keep_until)), "GET"},
                        keys[i]});
    }
    // On a replica too before a verdict counts: a nonce lost in a
    // failover would let the same delivery pass again.
    auto replies =
        m_session.redis().pipeline(sets, Retry::safe, ErrorReplies::returned, Replicas::wait);
    for (std::size_t n = 0; n < order.size(); ++n) {
        auto& key = *order[n];
        auto first = key.claims.front();
        const auto* reply = replies[n].get();
        const auto& sighting = requests[first].sighting;
        if (reply->type == REDIS_REPLY_NIL) { // fresh, and kept
            key.kept =
                NonceEntry{sighting.received_at, std::string(sighting.source), sighting.line};
            key.settled = 1;
            continue;
        }
        std::optional<NonceEntry> kept;
        if (reply->type == REDIS_REPLY_STRING)
            kept = decode_entry(std::string_view(reply->str, reply->len));
        else if (!error_starts(reply, "WRONGTYPE"))
            throw m_session.unexpected("a nonce claim");
        if (!kept) continue; // an earlier idem's layout: the script says
        auto decision = judge_nonce(kept, sighting, requests[first].window);
        if (decision.store) continue; // to replace the kept entry: the script does
        claims[first] = decision.claim;
        key.kept = std::move(kept);
        key.settled = 1;
    }
    while (true) {
        // Later claims judged against a known entry; what must replace it
        // (or meets an unknown one) runs the script, one per key a round.
        std::vector<std::size_t> contested;
        std::vector<KeyClaims*> contested_keys;
        for (auto* key : order) {
            while (key->settled < key->claims.size() && key->kept) {
                auto i = key->claims[key->settled];
                auto decision = judge_nonce(key->kept, requests[i].sighting, requests[i].window);
                if (decision.store) break;
                claims[i] = decision.claim;
                ++key->settled;
            }
            if (key->settled == key->claims.size()) continue;
            contested.push_back(key->claims[key->settled]);
            contested_keys.push_back(key);
        }
        if (contested.empty()) return claims;
        run_scripts(requests, keys, contested, claims);
        for (auto* key : contested_keys) {
            // What the script left is known only by its verdict: the next
            // claim of the key runs the script too.
            key->kept.reset();
            ++key->settled;
        }
    }
}

void RedisNonces::run_scripts(std::span<const NonceRequest> requests,
                              const std::vector<std::string>& keys,
                              const std::vector<std::size_t>& contested,
                              std::vector<NonceClaim>& claims) {
    auto sha = m_session.load_script(m_script, k_nonce_lua);
    std::vector<RoutedCommand> scripts;
    scripts.reserve(contested.size());
    for (auto i : contested) {
        const auto& request = requests[i];
        scripts.push_back(
            {{"EVALSHA", sha, "1", keys[i],
              std::to_string(request.sighting.received_at.time_since_epoch().count()),
              std::string(request.sighting.source), std::to_string(request.sighting.line),
              std::to_string(request.window.count()),
              std::to_string(keep_ms_of(request.keep_until))},
             keys[i]});
    }
    auto judged =
        m_session.redis().pipeline(scripts, Retry::safe, ErrorReplies::fail, Replicas::wait);
    for (std::size_t n = 0; n < contested.size(); ++n) {
        const auto* reply = judged[n].get();
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
            throw m_session.unexpected("a nonce claim");
        auto& claim = claims[contested[n]];
        auto verdict = integer_of(reply->element[0]);
        claim.verdict = verdict == 1   ? NonceVerdict::replay
                        : verdict == 2 ? NonceVerdict::same_record
                                       : NonceVerdict::fresh;
        if (claim.verdict != NonceVerdict::fresh)
            claim.first_seen = Timestamp(Duration(integer_of(reply->element[1])));
    }
}

std::vector<std::optional<NonceEntry>> RedisNonces::kept(std::span<const NonceName> names) {
    std::vector<std::optional<NonceEntry>> kept(names.size());
    if (names.empty()) return kept;
    std::vector<RoutedCommand> gets;
    gets.reserve(names.size());
    for (const auto& name : names) {
        auto key = nonce_key(name.scope, name.nonce);
        gets.push_back({{"GET", key}, key});
    }
    auto replies =
        m_session.redis().pipeline(gets, Retry::safe, ErrorReplies::returned, Replicas::ignore);
    std::vector<std::size_t> hashes; // an earlier idem's layout: first, source, line
    std::vector<RoutedCommand> fields;
    for (std::size_t i = 0; i < names.size(); ++i) {
        const auto* reply = replies[i].get();
        if (reply->type == REDIS_REPLY_STRING) {
            kept[i] = decode_entry(std::string_view(reply->str, reply->len));
        } else if (error_starts(reply, "WRONGTYPE")) {
            hashes.push_back(i);
            fields.push_back({{"HMGET", gets[i].key, "first", "source", "line"}, gets[i].key});
        } else if (reply->type != REDIS_REPLY_NIL) {
            throw m_session.unexpected("a nonce lookup");
        }
    }
    if (hashes.empty()) return kept;
    auto read =
        m_session.redis().pipeline(fields, Retry::safe, ErrorReplies::returned, Replicas::ignore);
    for (std::size_t n = 0; n < hashes.size(); ++n) {
        const auto* reply = read[n].get();
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 3 ||
            reply->element[0]->type != REDIS_REPLY_STRING)
            continue; // not a layout idem wrote
        auto text = [&](std::size_t at) {
            const auto* field = reply->element[at];
            return field->type == REDIS_REPLY_STRING ? std::string(field->str, field->len)
                                                     : std::string();
        };
        kept[hashes[n]] = decode_entry(
            fmt::format("{} {} {}", text(0), text(2).empty() ? "0" : text(2), text(1)));
    }
    return kept;
}

} // namespace idem::store::detail
