#include "idem/store/store.hpp"

#include "idem/util/errors.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <memory>
#include <string>
#include <vector>

namespace idem::store {

namespace {

struct ReplyDeleter {
    void operator()(redisReply* reply) const { freeReplyObject(reply); }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

// Keys are single-key operations, so any name is Redis Cluster-safe; the
// prefix keeps idem's keys apart from an application's.
std::string nonce_key(std::string_view scope, std::string_view nonce) {
    return fmt::format("idem:nonce:{}:{}", scope, nonce);
}

class RedisStore final : public Store {
  public:
    explicit RedisStore(const StoreLocation& location) : m_location(location) {
        timeval timeout{5, 0};
        m_context = redisConnectWithTimeout(location.host.c_str(), location.port, timeout);
        if (!m_context || m_context->err) {
            std::string message = m_context ? m_context->errstr : "out of memory";
            redisFree(m_context);
            m_context = nullptr;
            throw StoreError(
                fmt::format("cannot connect to store {}: {}", location.describe(), message));
        }
        redisSetTimeout(m_context, timeout);
        if (location.database != 0) command({"SELECT", std::to_string(location.database)});
    }

    ~RedisStore() override { redisFree(m_context); }

    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce, Timestamp now,
                           Timestamp expires_at) override {
        auto key = nonce_key(scope, nonce);
        auto ttl_ms = std::max<long long>(
            1, std::chrono::duration_cast<std::chrono::milliseconds>(expires_at - now).count());
        auto reply = command({"SET", key, std::to_string(now.time_since_epoch().count()), "NX",
                              "PX", std::to_string(ttl_ms)});
        NonceClaim claim;
        claim.fresh = reply->type == REDIS_REPLY_STATUS;
        if (!claim.fresh) {
            auto seen = command({"GET", key});
            long long micros = 0;
            if (seen->type == REDIS_REPLY_STRING &&
                std::from_chars(seen->str, seen->str + seen->len, micros).ec == std::errc{})
                claim.first_seen = Timestamp(Duration(micros));
        }
        return claim;
    }

    // Every claim is durable (as Redis is configured) once answered.
    void commit() override {}

    std::string describe() const override { return m_location.describe(); }

  private:
    Reply command(const std::vector<std::string>& arguments) {
        std::vector<const char*> pointers;
        std::vector<size_t> lengths;
        for (const auto& argument : arguments) {
            pointers.push_back(argument.data());
            lengths.push_back(argument.size());
        }
        auto* raw = static_cast<redisReply*>(redisCommandArgv(
            m_context, static_cast<int>(arguments.size()), pointers.data(), lengths.data()));
        if (!raw)
            throw StoreError(
                fmt::format("store {}: {}", m_location.describe(),
                            m_context->errstr[0] ? m_context->errstr : "connection lost"));
        Reply reply(raw);
        if (reply->type == REDIS_REPLY_ERROR)
            throw StoreError(fmt::format("store {}: {}", m_location.describe(),
                                         std::string(reply->str, reply->len)));
        return reply;
    }

    StoreLocation m_location;
    redisContext* m_context = nullptr;
};

} // namespace

std::unique_ptr<Store> open_redis_store(const StoreLocation& location) {
    return std::make_unique<RedisStore>(location);
}

} // namespace idem::store
