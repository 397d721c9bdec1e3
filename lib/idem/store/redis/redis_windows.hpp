#pragma once
// Internal to the Redis store: merge's open windows, one hash per run
// ("idem:merge:{name}"): the field is the window's key, the empty field the
// run's meta.

#include "idem/store/open_windows.hpp"
#include "idem/store/redis/redis_session.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::store::detail {

class RedisWindows {
public:
    explicit RedisWindows(RedisSession& session) : m_session(session) {}

    std::vector<std::pair<std::string, std::string>> load(std::string_view name, std::string& meta);
    // Queued, and applied in one MULTI/EXEC by the store's commit().
    void save(std::string_view name, const WindowChanges& changes);
    void clear(std::string_view name);

private:
    RedisSession& m_session;
};

} // namespace idem::store::detail
