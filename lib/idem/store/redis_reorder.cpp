#include "idem/store/detail/redis_reorder.hpp"

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

} // namespace idem::store::detail
