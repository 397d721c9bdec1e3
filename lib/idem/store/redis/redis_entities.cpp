#include "idem/store/redis/redis_entities.hpp"

#include <algorithm>

namespace idem::store::detail {

namespace {

std::string entities_key(std::string_view scope) {
    return fmt::format("idem:states:{{{}}}", scope);
}

} // namespace

std::vector<std::optional<std::string>>
RedisEntities::load(std::string_view scope, const std::vector<std::string>& entities) {
    m_session.apply_pending();
    std::vector<std::optional<std::string>> found(entities.size());
    auto key = entities_key(scope);
    for (std::size_t begin = 0; begin < entities.size(); begin += k_fields_per_command) {
        auto end = std::min(entities.size(), begin + k_fields_per_command);
        Arguments arguments{"HMGET", key};
        arguments.insert(arguments.end(), entities.begin() + static_cast<long>(begin),
                         entities.begin() + static_cast<long>(end));
        auto reply = m_session.redis().command(arguments, key);
        for (std::size_t i = begin; i < end && i - begin < reply->elements; ++i) {
            const auto* value = reply->element[i - begin];
            if (value->type == REDIS_REPLY_STRING) found[i] = std::string(value->str, value->len);
        }
    }
    return found;
}

void RedisEntities::save(std::string_view scope,
                         const std::vector<std::pair<std::string, std::string>>& states) {
    auto key = entities_key(scope);
    for (std::size_t begin = 0; begin < states.size(); begin += k_fields_per_command) {
        Arguments arguments{"HSET", key};
        for (std::size_t i = begin; i < std::min(states.size(), begin + k_fields_per_command);
             ++i) {
            arguments.push_back(states[i].first);
            arguments.push_back(states[i].second);
        }
        m_session.queue(std::move(arguments));
    }
}

void RedisEntities::clear(std::string_view scope) {
    m_session.queue({"DEL", entities_key(scope)});
}

} // namespace idem::store::detail
