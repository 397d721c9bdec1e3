#pragma once
// Internal to the Redis store: the checkpoints of `-o FILE` runs, one hash
// per run ("idem:checkpoint:NAME"): records done, each owned file's
// committed length, the counts.

#include "idem/store/checkpoints.hpp"
#include "idem/store/redis/redis_session.hpp"

#include <optional>
#include <string_view>

namespace idem::store::detail {

class RedisCheckpoints {
public:
    explicit RedisCheckpoints(RedisSession& session) : m_session(session) {}

    std::optional<Checkpoint> load(std::string_view name);
    // Queued, and applied in one MULTI/EXEC by the store's commit(), before
    // the claims it covers are confirmed.
    void save(std::string_view name, const Checkpoint& checkpoint);
    void clear(std::string_view name);

private:
    RedisSession& m_session;
};

} // namespace idem::store::detail
