#include "idem/store/redis/redis_reorder.hpp"

#include "idem/util/errors.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>

namespace idem::store::detail {

namespace {

// Space-separated integers, exactly as many as asked for.
template <typename... Numbers> bool read_numbers(std::string_view text, Numbers&... numbers) {
    const char* at = text.data();
    const char* end = text.data() + text.size();
    bool good = true;
    auto read_one = [&](auto& number) {
        if (!good) return;
        while (at < end && *at == ' ')
            ++at;
        auto [next, error] = std::from_chars(at, end, number);
        good = error == std::errc{};
        at = next;
    };
    (read_one(numbers), ...);
    return good && at == end;
}

} // namespace

std::string reorder_key(std::string_view scope, std::string_view what) {
    return fmt::format("idem:reorder:{{{}}}:{}", scope, what);
}

std::string encode_progress(const PartitionProgress& progress) {
    return fmt::format("{} {} {} {} {}", progress.started ? 1 : 0, progress.next.primary,
                       progress.next.secondary, progress.highest.primary,
                       progress.highest.secondary);
}

std::optional<PartitionProgress> decode_progress(const std::string& partition,
                                                 std::string_view text) {
    PartitionProgress progress;
    progress.partition = partition;
    long long started = 0;
    if (!read_numbers(text, started, progress.next.primary, progress.next.secondary,
                      progress.highest.primary, progress.highest.secondary))
        return std::nullopt;
    progress.started = started != 0;
    return progress;
}

std::string encode_held(const HeldRecordRow& row) {
    auto encoded = fmt::format("{} {} {} {}\n", row.key.primary, row.key.secondary,
                               row.arrival.time_since_epoch().count(), row.partition.size());
    encoded += row.partition;
    encoded += row.bytes;
    return encoded;
}

std::optional<HeldRecordRow> decode_held(const std::string& id, std::string_view text) {
    auto header_end = text.find('\n');
    if (header_end == std::string_view::npos) return std::nullopt;
    HeldRecordRow row;
    long long arrival = 0;
    std::uint64_t partition_size = 0;
    if (!read_numbers(text.substr(0, header_end), row.key.primary, row.key.secondary, arrival,
                      partition_size))
        return std::nullopt;
    auto body = text.substr(header_end + 1);
    if (partition_size > body.size()) return std::nullopt;
    auto [end, error] = std::from_chars(id.data(), id.data() + id.size(), row.id);
    if (error != std::errc{}) return std::nullopt;
    row.arrival = Timestamp(Duration(arrival));
    row.partition.assign(body.substr(0, partition_size));
    row.bytes.assign(body.substr(partition_size));
    return row;
}

std::vector<std::optional<PartitionProgress>>
RedisReorderState::load_partitions(std::string_view scope,
                                   const std::vector<std::string>& partitions) {
    std::vector<std::optional<PartitionProgress>> found(partitions.size());
    auto key = reorder_key(scope, "progress");
    for (std::size_t begin = 0; begin < partitions.size(); begin += k_fields_per_command) {
        auto end = std::min(partitions.size(), begin + k_fields_per_command);
        Arguments arguments{"HMGET", key};
        arguments.insert(arguments.end(), partitions.begin() + static_cast<long>(begin),
                         partitions.begin() + static_cast<long>(end));
        auto reply = m_session.redis().command(arguments, key);
        for (std::size_t i = begin; i < end && i - begin < reply->elements; ++i) {
            const auto* value = reply->element[i - begin];
            if (value->type != REDIS_REPLY_STRING) continue;
            found[i] = decode_progress(partitions[i], std::string_view(value->str, value->len));
        }
    }
    return found;
}

std::vector<HeldRecordRow> RedisReorderState::load_held(std::string_view scope) {
    auto key = reorder_key(scope, "held");
    auto reply = m_session.redis().command({"HGETALL", key}, key);
    std::vector<HeldRecordRow> rows;
    for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
        auto row = decode_held(string_of(reply->element[i]), string_of(reply->element[i + 1]));
        if (!row)
            throw StoreError(fmt::format("store {}: a held record of scope {} is damaged",
                                         m_session.describe(), scope));
        rows.push_back(std::move(*row));
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& left, const auto& right) { return left.id < right.id; });
    return rows;
}

void RedisReorderState::save(std::string_view scope, const ReorderChanges& changes) {
    auto progress_key = reorder_key(scope, "progress");
    for (std::size_t begin = 0; begin < changes.progress.size(); begin += k_fields_per_command) {
        Arguments arguments{"HSET", progress_key};
        for (std::size_t i = begin;
             i < std::min(changes.progress.size(), begin + k_fields_per_command); ++i) {
            arguments.push_back(changes.progress[i].partition);
            arguments.push_back(encode_progress(changes.progress[i]));
        }
        m_session.queue(std::move(arguments));
    }
    auto held_key = reorder_key(scope, "held");
    for (const auto& row : changes.held)
        m_session.queue({"HSET", held_key, std::to_string(row.id), encode_held(row)});
    for (std::size_t begin = 0; begin < changes.released.size(); begin += k_fields_per_command) {
        Arguments arguments{"HDEL", held_key};
        for (std::size_t i = begin;
             i < std::min(changes.released.size(), begin + k_fields_per_command); ++i)
            arguments.push_back(std::to_string(changes.released[i]));
        m_session.queue(std::move(arguments));
    }
}

void RedisReorderState::clear(std::string_view scope) {
    m_session.queue({"DEL", reorder_key(scope, "progress"), reorder_key(scope, "held")});
}

} // namespace idem::store::detail
