#pragma once
// Internal to the Redis store: what its roles share — the connection (one
// router over a node or a Cluster), the writes queued for commit(), and the
// scripts loaded on it. Each role (redis_<role>.hpp) holds a reference to
// the one session its store owns.

#include "idem/store/location.hpp"
#include "idem/store/redis/redis_cluster.hpp"
#include "idem/util/errors.hpp"

#include <charconv>
#include <fmt/format.h>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store::detail {

class RedisSession {
public:
    explicit RedisSession(const StoreLocation& location)
        : m_location(location), m_redis(seeds(), location.database, location.describe()) {}

    RedisRouter& redis() { return m_redis; }
    [[nodiscard]] const StoreLocation& location() const { return m_location; }
    [[nodiscard]] std::string describe() const { return m_location.describe(); }

    // The seeds a new connection of this store starts from (a heartbeat's).
    [[nodiscard]] std::vector<RedisEndpoint> seeds() const {
        std::vector<RedisEndpoint> seeds;
        for (const auto& [host, port] : m_location.seeds)
            seeds.push_back({host, port});
        if (seeds.empty()) seeds.push_back({m_location.host, m_location.port});
        return seeds;
    }

    // Queued, and applied in one MULTI/EXEC by apply_pending(). Every
    // queued command names its key first: a cluster applies one transaction
    // per slot (docs/stores.md).
    void queue(Arguments arguments) { m_pending.push_back(std::move(arguments)); }

    void apply_pending() {
        if (m_pending.empty()) return;
        std::vector<RoutedCommand> commands;
        commands.reserve(m_pending.size());
        for (auto& arguments : m_pending) {
            auto key = arguments.at(1);
            commands.push_back({std::move(arguments), std::move(key)});
        }
        m_pending.clear();
        m_redis.transact(commands);
    }

    // Loads a script once per connection; its SHA1 is kept in `sha`.
    const std::string& load_script(std::string& sha, const char* source) {
        if (sha.empty()) sha = m_redis.load_script(source);
        return sha;
    }

    // "store NAME: unexpected reply to WHAT"
    [[nodiscard]] StoreError unexpected(std::string_view what) const {
        return StoreError(fmt::format("store {}: unexpected reply to {}", describe(), what));
    }

private:
    StoreLocation m_location;
    RedisRouter m_redis;
    std::vector<Arguments> m_pending; // written by apply_pending()
};

// HSET/HDEL/HMGET name at most this many fields per command, so one
// command never grows with a scope's size.
inline constexpr std::size_t k_fields_per_command = 1000;

inline long long integer_of(const redisReply* reply) {
    if (reply->type == REDIS_REPLY_INTEGER) return reply->integer;
    long long value = 0;
    if (reply->type == REDIS_REPLY_STRING)
        std::from_chars(reply->str, reply->str + reply->len, value);
    return value;
}

inline std::string string_of(const redisReply* reply) {
    return reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len) : std::string();
}

} // namespace idem::store::detail
