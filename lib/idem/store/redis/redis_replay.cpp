#include "idem/store/redis/redis_replay.hpp"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <fmt/format.h>

namespace idem::store::detail {

namespace {

template <typename Number> Number number_of(const std::string& text) {
    Number value{};
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

// KEYS[1] the scope's hash; ARGV: owner, now_us, lease_until_us, rerun (0 resume,
// 1 retry failed, 2 force), then the keys. Answers, key by key in ARGV
// order, whether it was granted and the entry before ("" when none). The
// rule is may_claim_replay's; a granted key keeps its attempts and last
// response, and becomes in progress for the owner until the lease.
constexpr const char* k_claim_lua = R"lua(
local owner, now, lease, rerun = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local out = {}
for i = 5, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  local grant, rest = true, nil
  if v then
    local state, held_until
    state, held_until, rest = string.match(v, '^(%d) (%-?%d+) (.*)$')
    if not state then
      return redis.error_reply('ERR not a ledger entry idem wrote, under ' .. ARGV[i])
    end
    if state == '0' then grant = tonumber(held_until) <= now
    elseif state == '1' then grant = (rerun == '2')
    else grant = (string.match(rest, '^%d+ %-?%d+ %-?%d+ (%d) ') ~= '1') or (rerun ~= '0') end
  end
  if grant then
    local value
    if rest then
      local kept, tail = string.match(rest, '^(%d+ %-?%d+ %-?%d+ %d) %-?%d+ (.*)$')
      local owner_length, after = string.match(tail, '^(%d+):()')
      value = '0 ' .. lease .. ' ' .. kept .. ' ' .. ARGV[2] .. ' ' .. #owner .. ':' .. owner ..
              string.sub(tail, after + tonumber(owner_length))
    else
      value = '0 ' .. lease .. ' 0 0 0 0 ' .. ARGV[2] .. ' ' .. #owner .. ':' .. owner .. '0:0:0:'
    end
    redis.call('HSET', KEYS[1], ARGV[i], value)
  end
  out[#out + 1] = grant and 1 or 0
  out[#out + 1] = v or ''
end
return out
)lua";

// KEYS[1] the scope's hash; ARGV: owner, lease_until_us, then the keys. Extends
// the leases the owner still holds.
constexpr const char* k_renew_lua = R"lua(
for i = 3, #ARGV do
  local v = redis.call('HGET', KEYS[1], ARGV[i])
  local rest = v and string.match(v, '^0 %-?%d+ (.*)$')
  if rest then
    local owner_length, after = string.match(rest, '^%d+ %-?%d+ %-?%d+ %d %-?%d+ (%d+):()')
    if owner_length and string.sub(rest, after, after + tonumber(owner_length) - 1) == ARGV[1] then
      redis.call('HSET', KEYS[1], ARGV[i], '0 ' .. ARGV[2] .. ' ' .. rest)
    end
  end
end
return 0
)lua";

// One script call names at most this many keys.
constexpr std::size_t k_keys_per_script = 1000;

// A script per k_keys_per_script keys, in order: `head` (EVALSHA, the
// SHA, "1", the hash `name`, the script's own arguments), then the run of
// keys; the n-th names the keys from n * k_keys_per_script on.
std::vector<RoutedCommand> scripts_over(const std::string& name, const Arguments& head,
                                        const std::vector<std::string>& keys) {
    std::vector<RoutedCommand> scripts;
    for (std::size_t from = 0; from < keys.size(); from += k_keys_per_script) {
        auto to = std::min(keys.size(), from + k_keys_per_script);
        Arguments arguments = head;
        arguments.insert(arguments.end(), keys.begin() + static_cast<std::ptrdiff_t>(from),
                         keys.begin() + static_cast<std::ptrdiff_t>(to));
        scripts.push_back({std::move(arguments), name});
    }
    return scripts;
}

std::string moved_marker(std::string_view scope) {
    return fmt::format("idem:ledger-moved:{{{}}}", scope);
}

// Reads a number and the one space after it; false if there is none.
template <typename Number> bool take_number(std::string_view& text, Number& value) {
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc() || end == text.data() + text.size() || *end != ' ') return false;
    text.remove_prefix(static_cast<std::size_t>(end - text.data()) + 1);
    return true;
}

// Reads "LENGTH:BYTES".
bool take_text(std::string_view& text, std::string& value) {
    std::size_t length = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), length);
    if (error != std::errc() || end == text.data() + text.size() || *end != ':') return false;
    text.remove_prefix(static_cast<std::size_t>(end - text.data()) + 1);
    if (length > text.size()) return false;
    value.assign(text.substr(0, length));
    text.remove_prefix(length);
    return true;
}

} // namespace

std::string ledger_key(std::string_view scope) {
    return fmt::format("idem:ledger:{{{}}}", scope);
}

std::string encode_replay_entry(const ReplayEntry& entry) {
    return fmt::format("{} {} {} {} {} {} {} {}:{}{}:{}{}:{}{}:{}", static_cast<int>(entry.state),
                       entry.lease_until.time_since_epoch().count(), entry.attempts, entry.status,
                       entry.latency_ms, entry.permanent ? 1 : 0,
                       entry.updated_at.time_since_epoch().count(), entry.owner.size(), entry.owner,
                       entry.error.size(), entry.error, entry.response_digest.size(),
                       entry.response_digest, entry.response_head.size(), entry.response_head);
}

std::optional<ReplayEntry> decode_replay_entry(std::string_view key, std::string_view text) {
    ReplayEntry entry;
    entry.key = key;
    int state = 0, permanent = 0;
    long long lease = 0, updated = 0;
    if (!take_number(text, state) || state < 0 || state > 2 || !take_number(text, lease) ||
        !take_number(text, entry.attempts) || !take_number(text, entry.status) ||
        !take_number(text, entry.latency_ms) || !take_number(text, permanent) ||
        !take_number(text, updated) || !take_text(text, entry.owner) ||
        !take_text(text, entry.error) || !take_text(text, entry.response_digest) ||
        !take_text(text, entry.response_head) || !text.empty())
        return std::nullopt;
    entry.state = static_cast<ReplayState>(state);
    entry.permanent = permanent == 1;
    entry.lease_until = Timestamp(Duration(lease));
    entry.updated_at = Timestamp(Duration(updated));
    return entry;
}

std::string replay_key(std::string_view scope, std::string_view key) {
    return fmt::format("idem:replay:{{{}:{}}}", scope, key);
}

std::string replay_scan_pattern(std::string_view scope) {
    std::string pattern = "idem:replay:{";
    for (char c : scope) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
        pattern += c;
    }
    return pattern + ":*";
}

std::optional<ReplayEntry> replay_entry_from(std::string_view key,
                                             const std::vector<std::string>& values) {
    if (values.size() < 11 || values[0].empty()) return std::nullopt;
    ReplayEntry entry;
    entry.key = key;
    entry.state = static_cast<ReplayState>(number_of<int>(values[0]));
    entry.owner = values[1];
    entry.lease_until = Timestamp(Duration(number_of<long long>(values[2])));
    entry.attempts = number_of<std::uint32_t>(values[3]);
    entry.status = number_of<int>(values[4]);
    entry.latency_ms = number_of<std::int64_t>(values[5]);
    entry.permanent = values[6] == "1";
    entry.error = values[7];
    entry.response_digest = values[8];
    entry.response_head = values[9];
    entry.updated_at = Timestamp(Duration(number_of<long long>(values[10])));
    return entry;
}

std::vector<ReplayClaim> RedisReplayLedger::claim(std::string_view scope,
                                                  const std::vector<std::string>& keys,
                                                  std::string_view owner, Timestamp now,
                                                  Timestamp lease_until, ReplayRerun rerun) {
    m_session.apply_pending(); // outcomes saved before must land before these claims read them
    move_earlier_layout(scope);
    auto sha = m_session.load_script(m_claim_script, k_claim_lua);
    // In input order: a key twice in a batch is judged the second time
    // after the first.
    auto batch = scripts_over(ledger_key(scope),
                              {"EVALSHA", sha, "1", ledger_key(scope), std::string(owner),
                               std::to_string(now.time_since_epoch().count()),
                               std::to_string(lease_until.time_since_epoch().count()),
                               std::to_string(static_cast<int>(rerun))},
                              keys);
    // Never sent again: a claim that ran would then meet itself, in
    // progress under this owner, and the key would be skipped. On a
    // replica before a request goes out: one lost in a failover would
    // let a rerun send it again.
    auto replies =
        m_session.redis().pipeline(batch, Retry::never, ErrorReplies::fail, Replicas::wait);
    std::vector<ReplayClaim> claims(keys.size());
    for (std::size_t n = 0; n < batch.size(); ++n) {
        const auto* reply = replies[n].get();
        auto from = n * k_keys_per_script;
        auto to = std::min(keys.size(), from + k_keys_per_script);
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2 * (to - from))
            throw m_session.unexpected("a replay claim");
        for (auto k = from; k < to; ++k) {
            auto& claim = claims[k];
            claim.granted = integer_of(reply->element[2 * (k - from)]) == 1;
            auto previous = string_of(reply->element[2 * (k - from) + 1]);
            if (previous.empty()) continue;
            claim.previous = decode_replay_entry(keys[k], previous);
            if (!claim.previous) throw m_session.unexpected("a replay claim");
        }
    }
    return claims;
}

void RedisReplayLedger::renew_leases(std::string_view scope, const std::vector<std::string>& keys,
                                     std::string_view owner, Timestamp lease_until) {
    auto sha = m_session.load_script(m_renew_script, k_renew_lua);
    (void)m_session.redis().pipeline(
        scripts_over(ledger_key(scope),
                     {"EVALSHA", sha, "1", ledger_key(scope), std::string(owner),
                      std::to_string(lease_until.time_since_epoch().count())},
                     keys));
}

void RedisReplayLedger::save(std::string_view scope, const std::vector<ReplayEntry>& entries) {
    Arguments arguments;
    for (const auto& entry : entries) {
        if (arguments.size() >= 2 + 2 * k_fields_per_command) {
            m_session.queue(std::move(arguments));
            arguments.clear();
        }
        if (arguments.empty()) arguments = {"HSET", ledger_key(scope)};
        arguments.push_back(entry.key);
        arguments.push_back(encode_replay_entry(entry));
    }
    if (!arguments.empty()) m_session.queue(std::move(arguments));
}

void RedisReplayLedger::for_each(std::string_view scope,
                                 const std::function<void(const ReplayEntry&)>& visit) {
    auto& redis = m_session.redis();
    auto name = ledger_key(scope);
    std::string cursor = "0";
    do {
        auto page = redis.command({"HSCAN", name, cursor, "COUNT", "1000"}, name);
        if (page->type != REDIS_REPLY_ARRAY || page->elements != 2)
            throw m_session.unexpected("HSCAN");
        cursor = string_of(page->element[0]);
        const auto* pairs = page->element[1];
        for (std::size_t i = 0; i + 1 < pairs->elements; i += 2) {
            auto key = string_of(pairs->element[i]);
            if (auto entry = decode_replay_entry(key, string_of(pairs->element[i + 1])))
                visit(*entry);
        }
    } while (cursor != "0");
    // A ledger no run of this release has claimed from yet.
    if (!earlier_layout_left()) return;
    auto moved = redis.command({"GET", moved_marker(scope)}, moved_marker(scope));
    if (string_of(moved.get()) != "1") for_each_earlier(scope, visit);
}

bool RedisReplayLedger::earlier_layout_left() {
    if (m_none_left) return false;
    constexpr const char* k_none_left = "idem:ledger-moved:all";
    auto& redis = m_session.redis();
    if (string_of(redis.command({"GET", k_none_left}, k_none_left).get()) == "1") {
        m_none_left = true;
        return false;
    }
    for (std::size_t master = 0; master < redis.masters(); ++master) {
        std::string cursor = "0";
        do {
            auto page = redis.command_on_master(
                master, {"SCAN", cursor, "MATCH", "idem:replay:{*", "COUNT", "1000"});
            if (page->type != REDIS_REPLY_ARRAY || page->elements != 2)
                throw m_session.unexpected("SCAN");
            if (page->element[1]->elements > 0) return true;
            cursor = string_of(page->element[0]);
        } while (cursor != "0");
    }
    (void)redis.command({"SET", k_none_left, "1"}, k_none_left);
    m_none_left = true;
    return false;
}

void RedisReplayLedger::move_earlier_layout(std::string_view scope) {
    if (m_moved.contains(scope)) return;
    if (!earlier_layout_left()) {
        m_moved.emplace(scope);
        return;
    }
    auto marker = moved_marker(scope);
    auto& redis = m_session.redis();
    if (string_of(redis.command({"GET", marker}, marker).get()) != "1") {
        // Set only where no entry is yet (another process may have moved
        // it and claimed it since), then the old key dropped; both safe to
        // repeat, so a process killed midway leaves the next to finish.
        std::vector<RoutedCommand> moves, drops;
        auto flush = [&] {
            (void)redis.pipeline(moves, Retry::safe, ErrorReplies::fail, Replicas::wait);
            (void)redis.pipeline(drops, Retry::safe, ErrorReplies::fail, Replicas::wait);
            moves.clear();
            drops.clear();
        };
        for_each_earlier(scope, [&](const ReplayEntry& entry) {
            auto name = ledger_key(scope);
            moves.push_back({{"HSETNX", name, entry.key, encode_replay_entry(entry)}, name});
            auto old = replay_key(scope, entry.key);
            drops.push_back({{"DEL", old}, old});
            if (moves.size() >= k_fields_per_command) flush();
        });
        if (!moves.empty()) flush();
        (void)redis.command({"SET", marker, "1"}, marker);
    }
    m_moved.emplace(scope);
}

void RedisReplayLedger::for_each_earlier(std::string_view scope,
                                         const std::function<void(const ReplayEntry&)>& visit) {
    auto prefix = replay_key(scope, "");
    prefix.pop_back(); // "idem:replay:{scope:"
    auto& redis = m_session.redis();
    for (std::size_t master = 0; master < redis.masters(); ++master) {
        std::string cursor = "0";
        do {
            auto page = redis.command_on_master(
                master, {"SCAN", cursor, "MATCH", replay_scan_pattern(scope), "COUNT", "1000"});
            cursor = string_of(page->element[0]);
            const auto* names = page->element[1];
            for (std::size_t i = 0; i < names->elements; ++i) {
                auto name = string_of(names->element[i]);
                if (name.size() <= prefix.size() + 1) continue;
                auto key = name.substr(prefix.size(), name.size() - prefix.size() - 1);
                auto reply =
                    redis.command({"HMGET", name, "state", "owner", "lease", "attempts", "status",
                                   "latency", "permanent", "error", "digest", "head", "updated"},
                                  name);
                std::vector<std::string> values;
                for (std::size_t j = 0; j < reply->elements; ++j)
                    values.push_back(string_of(reply->element[j]));
                if (auto entry = replay_entry_from(key, values)) visit(*entry);
            }
        } while (cursor != "0");
    }
}

} // namespace idem::store::detail
