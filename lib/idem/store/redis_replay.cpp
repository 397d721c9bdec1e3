#include "idem/store/detail/redis_replay.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::store::detail {

namespace {

template <typename Number> Number number_of(const std::string& text) {
    Number value{};
    std::from_chars(text.data(), text.data() + text.size(), value);
    return value;
}

} // namespace

std::string replay_key(std::string_view scope, std::string_view key) {
    return fmt::format("idem:replay:{{{}:{}}}", scope, key);
}

std::string replay_scan_pattern(std::string_view scope) {
    std::string pattern = "idem:replay:{";
    for (char c : scope) {
        if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
        pattern += c;
    }
    return pattern + ":*";
}

std::vector<std::string> replay_fields(const ReplayEntry& entry) {
    return {"state",     std::to_string(static_cast<int>(entry.state)),
            "owner",     entry.owner,
            "lease",     std::to_string(entry.lease_until.time_since_epoch().count()),
            "attempts",  std::to_string(entry.attempts),
            "status",    std::to_string(entry.status),
            "latency",   std::to_string(entry.latency_ms),
            "permanent", entry.permanent ? "1" : "0",
            "error",     entry.error,
            "digest",    entry.response_digest,
            "head",      entry.response_head,
            "updated",   std::to_string(entry.updated_at.time_since_epoch().count())};
}

std::optional<ReplayEntry> replay_entry_from(std::string_view key,
                                             const std::vector<std::string>& values) {
    if (values.size() < 11 || values[0].empty()) return std::nullopt;
    ReplayEntry entry;
    entry.key = key;
    entry.state = static_cast<ReplayState>(number_of<int>(values[0]));
    entry.owner = values[1];
    entry.lease_until = Timestamp(Duration(number_of<long long>(values[2])));
    entry.attempts = number_of<std::uint32_t>(values[3]);
    entry.status = number_of<int>(values[4]);
    entry.latency_ms = number_of<std::int64_t>(values[5]);
    entry.permanent = values[6] == "1";
    entry.error = values[7];
    entry.response_digest = values[8];
    entry.response_head = values[9];
    entry.updated_at = Timestamp(Duration(number_of<long long>(values[10])));
    return entry;
}

} // namespace idem::store::detail
