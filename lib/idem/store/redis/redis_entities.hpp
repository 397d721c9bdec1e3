#pragma once
// Internal to the Redis store: states' entities, one hash per scope
// ("idem:states:{scope}"): entity -> its last state and version.

#include "idem/store/entity_states.hpp"
#include "idem/store/redis/redis_session.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::store::detail {

class RedisEntities {
public:
    explicit RedisEntities(RedisSession& session) : m_session(session) {}

    // Applies what is queued first: states saved before must land before
    // they are read.
    std::vector<std::optional<std::string>> load(std::string_view scope,
                                                 const std::vector<std::string>& entities);
    // Queued, and applied in one MULTI/EXEC by the store's commit().
    void save(std::string_view scope,
              const std::vector<std::pair<std::string, std::string>>& states);
    void clear(std::string_view scope);

private:
    RedisSession& m_session;
};

} // namespace idem::store::detail
