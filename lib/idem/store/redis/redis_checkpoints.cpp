#include "idem/store/redis/redis_checkpoints.hpp"

namespace idem::store::detail {

namespace {

std::string checkpoint_key(std::string_view name) {
    return fmt::format("idem:checkpoint:{}", name);
}

} // namespace

std::optional<Checkpoint> RedisCheckpoints::load(std::string_view name) {
    auto key = checkpoint_key(name);
    auto reply = m_session.redis().command({"HGETALL", key}, key);
    if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) return std::nullopt;
    Checkpoint checkpoint;
    for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
        auto field = string_of(reply->element[i]);
        auto value = static_cast<std::uint64_t>(integer_of(reply->element[i + 1]));
        if (field == "records_done")
            checkpoint.records_done = value;
        else if (field.starts_with("file:"))
            checkpoint.file_bytes[field.substr(5)] = value;
        else if (field == "finished_input")
            checkpoint.finished_input = value;
        else if (field.starts_with("count:"))
            checkpoint.counts[field.substr(6)] = value;
    }
    return checkpoint;
}

void RedisCheckpoints::save(std::string_view name, const Checkpoint& checkpoint) {
    Arguments arguments{"HSET", checkpoint_key(name), "records_done",
                        std::to_string(checkpoint.records_done)};
    for (const auto& [role, bytes] : checkpoint.file_bytes) {
        arguments.push_back("file:" + role);
        arguments.push_back(std::to_string(bytes));
    }
    if (checkpoint.finished_input) {
        arguments.push_back("finished_input");
        arguments.push_back(std::to_string(*checkpoint.finished_input));
    }
    for (const auto& [counted, count] : checkpoint.counts) {
        arguments.push_back("count:" + counted);
        arguments.push_back(std::to_string(count));
    }
    m_session.queue({"DEL", checkpoint_key(name)});
    m_session.queue(std::move(arguments));
}

void RedisCheckpoints::clear(std::string_view name) {
    m_session.queue({"DEL", checkpoint_key(name)});
}

} // namespace idem::store::detail
