#include "idem/store/redis/redis_fingerprint_claims.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <thread>

namespace idem::store::detail {

namespace {

// Makes ARGV[2] the first copy of KEYS[1], expiring at ARGV[3] ms, if it
// still holds what a claim met (ARGV[1]), dropping the evidence kept for
// that one (KEYS[2]); answers {1}, else {0, what it holds now}.
constexpr const char* k_take_lua = R"lua(
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then return {0, v} end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3])
return {1}
)lua";

// Bounds an event's evidence list (KEYS[1]) to ARGV[2] entries, the
// first ones and the latest, counting what it drops in KEYS[2] (which
// expires at ARGV[1] ms; 0: never); answers what had been dropped
// before. Only a list past its bound is given to it, so it runs once per
// batch for an event already repeated that often, never for the others.
constexpr const char* k_bound_lua = R"lua(
local n = redis.call('LLEN', KEYS[1])
local keep = tonumber(ARGV[2])
local dropped = tonumber(redis.call('GET', KEYS[2]) or '0')
if n > keep then
  local latest = redis.call('LINDEX', KEYS[1], -1)
  redis.call('LTRIM', KEYS[1], 0, keep - 2)
  redis.call('RPUSH', KEYS[1], latest)
  redis.call('INCRBY', KEYS[2], n - keep)
  if ARGV[1] ~= '0' then redis.call('PEXPIREAT', KEYS[2], ARGV[1]) end
end
return dropped
)lua";

// A fingerprint an earlier idem kept as a hash (first_seen, count,
// source, line, owner) becomes the string a claim reads now, with its
// expiry: confirmed (owner "-") when it had no owner, so its repeats stay
// in the shared list it kept them in; else batch 1 of its owner, which
// confirmed none under this layout (so it is asked). Answers 0 for a key
// of another type: not idem's.
constexpr const char* k_convert_lua = R"lua(
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' or t == 'none' then return 1 end -- another process converted it, or it expired
if t ~= 'hash' then return 0 end
local h = redis.call('HMGET', KEYS[1], 'first_seen', 'source', 'line', 'owner')
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
if not h[1] or ttl == -2 then return 1 end
local expires = 0
if ttl > 0 then
  local now = redis.call('TIME')
  expires = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
end
local value = h[1] .. ' ' .. (h[3] or '0') .. ' ' .. (h[4] and '1 ' or '0 ') .. expires .. ' ' ..
          (h[4] or '-') .. ' ' .. (h[2] or '')
if ttl > 0 then
  redis.call('SET', KEYS[1], value, 'PX', ttl)
else
  redis.call('SET', KEYS[1], value)
end
return 1
)lua";

long long expiry_ms(const FingerprintClaim& claim) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               claim.expires_at.time_since_epoch())
        .count();
}

} // namespace

// Pipelined: every claim of the batch is sent before the first reply is
// read, so a batch costs one round trip, not one per record. A new
// fingerprint is one `SET NX PXAT GET`; a fingerprint already there
// comes back with the claim's reply and is judged here
// (judge_met_first_copy), then counted as a repeat, or claimed anew by
// a script that first checks it is still what was met (settle_first_copies_met). A
// first copy of another process's unconfirmed batch is counted once that
// owner is known to be alive, and taken over once it is known dead.
std::vector<FingerprintResult>
RedisFingerprintClaims::claim(std::string_view scope, const std::vector<FingerprintClaim>& claims) {
    std::vector<FingerprintResult> results(claims.size());
    if (claims.empty()) return results;
    m_session.load_script(m_take_script, k_take_lua);
    if (!m_heartbeat)
        m_heartbeat = std::make_unique<Heartbeat>(m_session.seeds(), m_session.location().database,
                                                  m_session.describe(), m_owner);
    std::vector<std::string> keys;
    std::vector<std::string> values; // what this record's claim puts in the store
    keys.reserve(claims.size());
    values.reserve(claims.size());
    for (const auto& claim : claims) {
        keys.push_back(fingerprint_key(scope, claim.fingerprint));
        values.push_back(encode_first_copy({claim.event_time.time_since_epoch().count(), claim.line,
                                            m_batch, expiry_ms(claim), m_owner, claim.source}));
    }
    std::vector<std::size_t> setting(claims.size());
    for (std::size_t i = 0; i < claims.size(); ++i)
        setting[i] = i;
    while (!setting.empty()) {
        std::vector<RoutedCommand> batch;
        batch.reserve(setting.size());
        for (auto i : setting)
            batch.push_back({{"SET", keys[i], values[i], "NX", "PXAT",
                              std::to_string(expiry_ms(claims[i])), "GET"},
                             keys[i]});
        // On a replica too before a record is written out as a first
        // copy: a claim lost in a failover would be a first copy twice.
        auto replies =
            m_session.redis().pipeline(batch, Retry::safe, ErrorReplies::returned, Replicas::wait);
        std::vector<std::size_t> hashes; // kept by an earlier idem
        std::vector<std::pair<std::size_t, std::string>> met;
        for (std::size_t n = 0; n < setting.size(); ++n) {
            auto i = setting[n];
            const auto* reply = replies[n].get();
            if (reply->type == REDIS_REPLY_NIL)
                claimed(claims[i], results[i]);
            else if (reply->type == REDIS_REPLY_STRING)
                met.emplace_back(i, string_of(reply));
            else if (error_starts(reply, "WRONGTYPE"))
                hashes.push_back(i);
            else
                throw unexpected_reply("a claim", reply);
        }
        setting = settle_first_copies_met(claims, keys, values, met, results);
        if (!hashes.empty()) {
            convert_earlier_layout(keys, hashes);
            setting.insert(setting.end(), hashes.begin(), hashes.end());
        }
    }
    return results;
}

// Not in one transaction with the claims (Redis has none across a
// pipeline): see docs/dedup.md on what a crash can do with Redis.
void RedisFingerprintClaims::release(std::string_view scope, const FingerprintBytes& fingerprint) {
    // Its own evidence list, if it has one yet, is named after it and
    // expires with it; no later first copy shares that name.
    auto key = fingerprint_key(scope, fingerprint);
    m_session.queue({"DEL", key});
}

// SCAN for the scope's fingerprints (one hash slot each), then each
// one's first copy, then its evidence list (named after the first copy),
// pipelined per page. A fingerprint an earlier idem kept as a hash is
// read as one.
void RedisFingerprintClaims::for_each_record(
    std::string_view scope, const std::function<void(const FingerprintRecord&)>& visit) {
    auto pattern = fmt::format("idem:fp:{{{}:*", scope);
    // A cluster spreads the scope's fingerprints over every master.
    for (std::size_t master = 0; master < m_session.redis().masters(); ++master) {
        std::string cursor = "0";
        do {
            auto page = m_session.redis().command_on_master(
                master, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
            if (page->type != REDIS_REPLY_ARRAY || page->elements != 2)
                throw StoreError(
                    fmt::format("store {}: unexpected reply to SCAN", m_session.describe()));
            cursor = string_of(page->element[0]);
            std::vector<std::string> keys;
            std::vector<RoutedCommand> reads;
            for (std::size_t i = 0; i < page->element[1]->elements; ++i) {
                keys.push_back(string_of(page->element[1]->element[i]));
                reads.push_back({{"GET", keys.back()}, keys.back()});
            }
            auto firsts = m_session.redis().pipeline(reads, Retry::safe, ErrorReplies::returned);
            std::vector<FingerprintRecord> records;
            reads.clear();
            for (std::size_t k = 0; k < keys.size(); ++k) {
                FingerprintRecord record;
                std::string evidence;
                std::string not_kept;
                if (!fingerprint_of(keys[k], record.fingerprint) ||
                    !read_first_copy(keys[k], firsts[k].get(), record, evidence, not_kept))
                    continue; // not idem's, or expired between SCAN and GET
                records.push_back(std::move(record));
                reads.push_back({{"LRANGE", evidence, "0", "-1"}, keys[k]});
                reads.push_back({{"GET", not_kept}, keys[k]});
            }
            auto repeats = m_session.redis().pipeline(reads);
            for (std::size_t k = 0; k < records.size(); ++k) {
                auto& record = records[k];
                visit(record);
                record.first = false;
                const auto* list = repeats[2 * k].get();
                if (list->type != REDIS_REPLY_ARRAY) continue;
                // The list's last entry is the latest repeat; the ones
                // before it past the bound were only counted.
                auto not_kept = static_cast<std::uint64_t>(integer_of(repeats[2 * k + 1].get()));
                for (std::size_t i = 0; i < list->elements; ++i) {
                    record.copies_not_kept = i + 1 == list->elements ? not_kept : 0;
                    if (decode_evidence(string_of(list->element[i]), record)) visit(record);
                }
            }
        } while (cursor != "0");
    }
}

// One write confirms every first copy the batch claimed:
// "idem:confirmed:OWNER" says the last batch confirmed, and lives as long as
// the longest-lived of them. A process that dies before stops beating its
// heartbeat, and the next claim that meets one of its unconfirmed first
// copies takes it over (docs/dedup.md), so a rerun emits the batch again
// instead of losing it.
//
// On a replica too before the run goes on: a confirmation lost with its
// master would leave the batch unconfirmed once this process is gone, and
// the next claim to meet one of its first copies would take it over and
// write that record out a second time.
void RedisFingerprintClaims::confirm_batch() {
    if (!m_batch_claimed) return;
    auto key = confirmed_key(m_owner);
    (void)m_session.redis().pipeline(
        {{{"SET", key, std::to_string(m_batch), "PXAT", std::to_string(m_confirmed_until_ms)},
          key}},
        Retry::safe, ErrorReplies::fail, Replicas::wait);
    ++m_batch;
    m_batch_claimed = false;
}

// Judges the first copies the claims met (index, value): a repeat is
// kept in that first copy's own evidence list (two plain commands, its
// count the list's length); a first copy claimed anew or taken over is
// replaced by the take script, only if it still holds what was met.
// Answers the claims whose fingerprint vanished meanwhile, to be claimed
// again.
std::vector<std::size_t> RedisFingerprintClaims::settle_first_copies_met(
    const std::vector<FingerprintClaim>& claims, const std::vector<std::string>& keys,
    const std::vector<std::string>& values, std::vector<std::pair<std::size_t, std::string>> met,
    std::vector<FingerprintResult>& results) {
    std::vector<std::size_t> vanished;
    while (!met.empty()) {
        std::vector<FirstCopy> firsts;
        std::vector<MetFirstCopy> verdicts;
        std::vector<std::string> owners_to_ask;
        for (const auto& [i, value] : met) {
            auto first = decode_first_copy(value);
            if (!first)
                throw StoreError(fmt::format("store {}: fingerprint {} holds a damaged value",
                                             m_session.describe(), keys[i]));
            auto owner = std::string(first->owner);
            auto verdict = judge_met_first_copy(*first, claims[i], m_owner, m_batch,
                                                m_confirmed_batches[owner]);
            if (verdict == MetFirstCopy::ask_owner) owners_to_ask.push_back(owner);
            firsts.push_back(*first);
            verdicts.push_back(verdict);
        }
        resolve_owners(firsts, verdicts, owners_to_ask);
        std::vector<RoutedCommand> batch;
        std::vector<std::size_t> settling; // indexes into met, in the order sent
        for (std::size_t n = 0; n < met.size(); ++n) {
            auto i = met[n].first;
            if (verdicts[n] == MetFirstCopy::mine_again) {
                claimed(claims[i], results[i]);
                continue;
            }
            auto evidence = evidence_key(keys[i], firsts[n]);
            settling.push_back(n);
            if (verdicts[n] == MetFirstCopy::repeat) {
                batch.push_back({{"RPUSH", evidence,
                                  encode_evidence(claims[i].source, claims[i].line,
                                                  claims[i].event_time.time_since_epoch().count())},
                                 keys[i]});
                // Expiring with its first copy (whose value says when).
                if (firsts[n].expires_ms > 0)
                    batch.push_back(
                        {{"PEXPIREAT", evidence, std::to_string(firsts[n].expires_ms)}, keys[i]});
            } else { // claim_anew: resolve_owners left no ask_owner
                batch.push_back({{"EVALSHA", m_take_script, "2", keys[i], evidence, met[n].second,
                                  values[i], std::to_string(expiry_ms(claims[i]))},
                                 keys[i]});
            }
        }
        // A first copy claimed anew or taken over counts as this process's
        // only once a replica holds it, as a new one does (claim()).
        auto replies =
            m_session.redis().pipeline(batch, Retry::safe, ErrorReplies::fail, Replicas::wait);
        std::vector<std::pair<std::size_t, std::string>> changed;
        std::vector<std::pair<std::size_t, std::size_t>> overflowing; // claim, met
        std::size_t r = 0;
        for (auto n : settling) {
            auto i = met[n].first;
            const auto* reply = replies[r++].get();
            if (verdicts[n] == MetFirstCopy::repeat) {
                if (firsts[n].expires_ms > 0) ++r; // PEXPIREAT's
                if (reply->type != REDIS_REPLY_INTEGER)
                    throw unexpected_reply("a repeat's evidence", reply);
                auto& result = results[i];
                result.first = false;
                result.seen_count = static_cast<std::uint64_t>(reply->integer) + 1;
                result.first_seen = Timestamp(Duration(firsts[n].first_seen_us));
                result.first_source = std::string(firsts[n].source);
                result.first_line = firsts[n].line;
                if (static_cast<std::uint64_t>(reply->integer) > k_kept_repeats + 1)
                    overflowing.push_back({i, n});
                continue;
            }
            if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1)
                throw unexpected_reply("a claim", reply);
            if (integer_of(reply->element[0]) == 1) {
                claimed(claims[i], results[i]);
            } else if (reply->elements > 1 && reply->element[1]->type == REDIS_REPLY_STRING) {
                changed.emplace_back(i, string_of(reply->element[1])); // look again
            } else {
                vanished.push_back(i);
            }
        }
        bound_evidence(keys, firsts, overflowing, results);
        met = std::move(changed);
    }
    return vanished;
}

// Repeats past the ones an event keeps (the first k_kept_repeats and the
// latest): one bound script per event trims its list and counts what it
// dropped. A repeat's count is then its place when pushed plus what had
// been dropped before: every push of this batch came before its trim.
// (Another process trimming the same event in between makes a count
// that high too; docs/dedup.md.)
void RedisFingerprintClaims::bound_evidence(
    const std::vector<std::string>& keys, const std::vector<FirstCopy>& firsts,
    const std::vector<std::pair<std::size_t, std::size_t>>& overflowing,
    std::vector<FingerprintResult>& results) {
    if (overflowing.empty()) return;
    m_session.load_script(m_bound_script, k_bound_lua);
    std::map<std::string, std::size_t> script_of; // evidence list -> its script's reply
    std::vector<RoutedCommand> batch;
    std::vector<std::size_t> reply_of(overflowing.size());
    for (std::size_t k = 0; k < overflowing.size(); ++k) {
        auto [i, n] = overflowing[k];
        auto evidence = evidence_key(keys[i], firsts[n]);
        auto [at, added] = script_of.try_emplace(evidence, batch.size());
        reply_of[k] = at->second;
        if (!added) continue;
        batch.push_back(
            {{"EVALSHA", m_bound_script, "2", evidence, not_kept_key(keys[i], firsts[n]),
              std::to_string(firsts[n].expires_ms), std::to_string(k_kept_repeats + 1)},
             keys[i]});
    }
    auto replies = m_session.redis().pipeline(batch);
    for (const auto& reply : replies)
        if (reply->type != REDIS_REPLY_INTEGER)
            throw unexpected_reply("a repeat's evidence", reply.get());
    for (std::size_t k = 0; k < overflowing.size(); ++k)
        // seen_count holds 1 + the place it was pushed at.
        results[overflowing[k].first].seen_count +=
            static_cast<std::uint64_t>(replies[reply_of[k]]->integer);
}

// Settles the claims that met another owner's unconfirmed batch: the
// owners' confirmations are read; an owner still behind and alive makes
// the record a repeat; a dead one's confirmations are read once more,
// since a process that ends confirms its last batch before its heartbeat
// goes, and what is still unconfirmed is taken over.
void RedisFingerprintClaims::resolve_owners(const std::vector<FirstCopy>& firsts,
                                            std::vector<MetFirstCopy>& verdicts,
                                            std::vector<std::string>& owners) {
    if (owners.empty()) return;
    std::sort(owners.begin(), owners.end());
    owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
    read_confirmed_batches(owners);
    std::map<std::string, bool, std::less<>> owner_alive;
    for (std::size_t n = 0; n < firsts.size(); ++n) {
        auto owner = std::string(firsts[n].owner);
        if (verdicts[n] == MetFirstCopy::ask_owner &&
            firsts[n].batch > m_confirmed_batches[owner] && !owner_alive.contains(owner))
            owner_alive[owner] = wait_for_verdict(owner);
    }
    std::vector<std::string> dead;
    for (const auto& [owner, alive] : owner_alive)
        if (!alive) dead.push_back(owner);
    if (!dead.empty()) read_confirmed_batches(dead);
    for (std::size_t n = 0; n < firsts.size(); ++n) {
        if (verdicts[n] != MetFirstCopy::ask_owner) continue;
        auto owner = std::string(firsts[n].owner);
        verdicts[n] = firsts[n].batch <= m_confirmed_batches[owner] || owner_alive[owner]
                          ? MetFirstCopy::repeat
                          : MetFirstCopy::claim_anew;
    }
}

// The last batch each owner confirmed, read again for owners whose
// first copies are past what this process knew.
void RedisFingerprintClaims::read_confirmed_batches(const std::vector<std::string>& owners) {
    std::vector<RoutedCommand> reads;
    reads.reserve(owners.size());
    for (const auto& owner : owners) {
        auto key = confirmed_key(owner);
        reads.push_back({{"GET", key}, key});
    }
    auto replies = m_session.redis().pipeline(reads);
    for (std::size_t i = 0; i < owners.size(); ++i) {
        std::uint64_t batch = 0;
        if (replies[i]->type == REDIS_REPLY_STRING)
            std::from_chars(replies[i]->str, replies[i]->str + replies[i]->len, batch);
        auto& known = m_confirmed_batches[owners[i]];
        known = std::max(known, batch);
    }
}

// This record is the first copy: its batch now holds a claim to confirm.
void RedisFingerprintClaims::claimed(const FingerprintClaim& claim, FingerprintResult& result) {
    result = FingerprintResult{};
    result.first = true;
    result.seen_count = 1;
    result.first_seen = claim.event_time;
    result.first_source = std::string(claim.source);
    result.first_line = claim.line;
    m_batch_claimed = true;
    m_confirmed_until_ms = std::max(m_confirmed_until_ms, expiry_ms(claim));
}

// Turns the fingerprints an earlier idem kept as hashes into the strings
// claims read now.
void RedisFingerprintClaims::convert_earlier_layout(const std::vector<std::string>& keys,
                                                    const std::vector<std::size_t>& indexes) {
    m_session.load_script(m_convert_script, k_convert_lua);
    std::vector<RoutedCommand> batch;
    for (auto i : indexes)
        batch.push_back({{"EVALSHA", m_convert_script, "1", keys[i]}, keys[i]});
    auto replies = m_session.redis().pipeline(batch);
    for (std::size_t n = 0; n < indexes.size(); ++n)
        if (replies[n]->type != REDIS_REPLY_INTEGER || replies[n]->integer != 1)
            throw StoreError(fmt::format("store {}: key {} is not a fingerprint idem keeps",
                                         m_session.describe(), keys[indexes[n]]));
}

// A first copy as a string, or as the hash an earlier idem kept, the
// list its repeats are kept in and the count of those the list dropped.
bool RedisFingerprintClaims::read_first_copy(const std::string& key, const redisReply* reply,
                                             FingerprintRecord& record, std::string& evidence,
                                             std::string& not_kept) {
    if (reply->type == REDIS_REPLY_STRING) {
        auto first = decode_first_copy(std::string_view(reply->str, reply->len));
        if (!first) return false;
        record.event_time = Timestamp(Duration(first->first_seen_us));
        record.source = std::string(first->source);
        record.line = first->line;
        evidence = evidence_key(key, *first);
        not_kept = not_kept_key(key, *first);
        return true;
    }
    if (!error_starts(reply, "WRONGTYPE")) return false;
    auto fields = m_session.redis().command({"HMGET", key, "first_seen", "source", "line"}, key);
    if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 3 ||
        fields->element[0]->type != REDIS_REPLY_STRING)
        return false;
    record.event_time = Timestamp(Duration(integer_of(fields->element[0])));
    record.source = string_of(fields->element[1]);
    record.line = static_cast<std::uint64_t>(integer_of(fields->element[2]));
    FirstCopy confirmed;
    confirmed.owner = k_no_owner;
    evidence = evidence_key(key, confirmed);
    not_kept = not_kept_key(key, confirmed);
    return true;
}

StoreError RedisFingerprintClaims::unexpected_reply(std::string_view to,
                                                    const redisReply* reply) const {
    // SET ... NX GET came with Redis 7.0; an older server calls it a
    // syntax error.
    if (error_starts(reply, "ERR syntax error"))
        return StoreError(fmt::format("store {}: Redis 7.0 or later is needed (SET NX GET)",
                                      m_session.describe()));
    return StoreError(
        fmt::format("store {}: unexpected reply to {}{}", m_session.describe(), to,
                    reply->type == REDIS_REPLY_ERROR
                        ? fmt::format(": {}", std::string_view(reply->str, reply->len))
                        : std::string()));
}

// Whether the owner of a claim met is alive: its heartbeat changes, or
// stays silent long enough to mean it died. Waits at most about
// k_silence_is_death, once per owner this process meets.
bool RedisFingerprintClaims::wait_for_verdict(const std::string& owner) {
    for (;;) {
        auto key = heartbeat_key(owner);
        auto reply = m_session.redis().command({"GET", key}, key);
        std::optional<std::string> beat;
        if (reply->type == REDIS_REPLY_STRING) beat = string_of(reply.get());
        // A read that waited out a failover of the heartbeat's master is
        // a gap in the looks (k_observation_gap): judged afresh after it.
        switch (m_liveness.judge(owner, beat, LivenessClock::now())) {
        case OwnerLiveness::Verdict::alive:
            return true;
        case OwnerLiveness::Verdict::dead:
            return false;
        case OwnerLiveness::Verdict::unsure:
            std::this_thread::sleep_for(k_beat_interval / 5);
        }
    }
}

} // namespace idem::store::detail
