#include "idem/store/redis/redis_windows.hpp"

#include <algorithm>

namespace idem::store::detail {

namespace {

std::string windows_key(std::string_view name) {
    return fmt::format("idem:merge:{{{}}}", name);
}

} // namespace

std::vector<std::pair<std::string, std::string>> RedisWindows::load(std::string_view name,
                                                                    std::string& meta) {
    auto key = windows_key(name);
    auto reply = m_session.redis().command({"HGETALL", key}, key);
    std::vector<std::pair<std::string, std::string>> windows;
    meta.clear();
    for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
        auto field = string_of(reply->element[i]);
        auto state = string_of(reply->element[i + 1]);
        if (field.empty())
            meta = std::move(state);
        else
            windows.emplace_back(std::move(field), std::move(state));
    }
    return windows;
}

void RedisWindows::save(std::string_view name, const WindowChanges& changes) {
    auto key = windows_key(name);
    for (std::size_t begin = 0; begin < changes.saved.size(); begin += k_fields_per_command) {
        Arguments arguments{"HSET", key};
        for (std::size_t i = begin;
             i < std::min(changes.saved.size(), begin + k_fields_per_command); ++i) {
            arguments.push_back(changes.saved[i].first);
            arguments.push_back(changes.saved[i].second);
        }
        m_session.queue(std::move(arguments));
    }
    for (std::size_t begin = 0; begin < changes.removed.size(); begin += k_fields_per_command) {
        Arguments arguments{"HDEL", key};
        for (std::size_t i = begin;
             i < std::min(changes.removed.size(), begin + k_fields_per_command); ++i)
            arguments.push_back(changes.removed[i]);
        m_session.queue(std::move(arguments));
    }
    m_session.queue({"HSET", key, "", changes.meta});
}

void RedisWindows::clear(std::string_view name) {
    m_session.queue({"DEL", windows_key(name)});
}

} // namespace idem::store::detail
