#include "idem/store/redis/redis_replay.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::store::detail {

namespace {

template <typename Number> Number number_of(const std::string& text) {
    Number value{};
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

} // namespace

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

std::vector<std::string> replay_fields(const ReplayEntry& entry) {
    return {"state",     std::to_string(static_cast<int>(entry.state)),
            "owner",     entry.owner,
            "lease",     std::to_string(entry.lease_until.time_since_epoch().count()),
            "attempts",  std::to_string(entry.attempts),
            "status",    std::to_string(entry.status),
            "latency",   std::to_string(entry.latency_ms),
            "permanent", entry.permanent ? "1" : "0",
            "error",     entry.error,
            "digest",    entry.response_digest,
            "head",      entry.response_head,
            "updated",   std::to_string(entry.updated_at.time_since_epoch().count())};
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
    auto sha = m_session.load_script(m_claim_script, k_replay_claim_lua);
    std::vector<RoutedCommand> batch;
    for (const auto& key : keys) {
        auto name = replay_key(scope, key);
        batch.push_back({{"EVALSHA", sha, "1", name, std::string(owner),
                          std::to_string(now.time_since_epoch().count()),
                          std::to_string(lease_until.time_since_epoch().count()),
                          std::to_string(static_cast<int>(rerun))},
                         name});
    }
    // Never sent again: a claim that ran would then meet itself, in
    // progress under this owner, and the key would be skipped. On a
    // replica before a request goes out: one lost in a failover would
    // let a rerun send it again.
    auto replies =
        m_session.redis().pipeline(batch, Retry::never, ErrorReplies::fail, Replicas::wait);
    std::vector<ReplayClaim> claims;
    claims.reserve(keys.size());
    for (std::size_t k = 0; k < keys.size(); ++k) {
        const auto& reply = replies[k];
        auto& claim = claims.emplace_back();
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 12)
            throw m_session.unexpected("a replay claim");
        claim.granted = integer_of(reply->element[0]) == 1;
        std::vector<std::string> values;
        for (std::size_t i = 1; i < reply->elements; ++i)
            values.push_back(string_of(reply->element[i]));
        claim.previous = replay_entry_from(keys[k], values);
    }
    return claims;
}

void RedisReplayLedger::renew_leases(std::string_view scope, const std::vector<std::string>& keys,
                                     std::string_view owner, Timestamp lease_until) {
    auto sha = m_session.load_script(m_renew_script, k_replay_renew_lua);
    std::vector<RoutedCommand> batch;
    for (const auto& key : keys) {
        auto name = replay_key(scope, key);
        batch.push_back({{"EVALSHA", sha, "1", name, std::string(owner),
                          std::to_string(lease_until.time_since_epoch().count())},
                         name});
    }
    (void)m_session.redis().pipeline(batch);
}

void RedisReplayLedger::save(std::string_view scope, const std::vector<ReplayEntry>& entries) {
    for (const auto& entry : entries) {
        Arguments arguments = {"HSET", replay_key(scope, entry.key)};
        for (auto& field : replay_fields(entry))
            arguments.push_back(std::move(field));
        m_session.queue(std::move(arguments));
    }
}

void RedisReplayLedger::for_each(std::string_view scope,
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
