#include "idem/store/redis/redis_held_copies.hpp"

#include <algorithm>

#include "idem/util/encoding.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::store::detail {

std::string held_copies_key(std::string_view name) {
    return fmt::format("idem:dedup-held:{{{}}}", name);
}

std::string encode_held_copy(const HeldCopyRow& row) {
    auto encoded = fmt::format("{} {} {}\n", row.line, row.event_time.time_since_epoch().count(),
                               row.source.size());
    encoded.append(reinterpret_cast<const char*>(row.fingerprint.data()), row.fingerprint.size());
    encoded += row.source;
    encoded += row.bytes;
    return encoded;
}

std::optional<HeldCopyRow> decode_held_copy(const std::string& id, std::string_view text) {
    HeldCopyRow row;
    auto [id_end, id_error] = std::from_chars(id.data(), id.data() + id.size(), row.id);
    if (id_error != std::errc{} || id_end != id.data() + id.size()) return std::nullopt;
    auto header_end = text.find('\n');
    if (header_end == std::string_view::npos) return std::nullopt;
    const char* at = text.data();
    const char* end = text.data() + header_end;
    long long event_time = 0;
    std::uint64_t source_size = 0;
    auto read = [&](auto& number) {
        while (at < end && *at == ' ')
            ++at;
        auto [next, error] = std::from_chars(at, end, number);
        at = next;
        return error == std::errc{};
    };
    if (!read(row.line) || !read(event_time) || !read(source_size) || at != end)
        return std::nullopt;
    auto body = text.substr(header_end + 1);
    if (body.size() < row.fingerprint.size() || source_size > body.size() - row.fingerprint.size())
        return std::nullopt;
    std::copy_n(body.data(), row.fingerprint.size(), row.fingerprint.data());
    body.remove_prefix(row.fingerprint.size());
    row.event_time = Timestamp(Duration(event_time));
    row.source.assign(body.substr(0, source_size));
    row.bytes.assign(body.substr(source_size));
    return row;
}

std::string legacy_held_copies_scope(std::string_view name) {
    return fmt::format("dedup held {}", name);
}

std::optional<HeldCopyRow> held_copy_of_legacy(const HeldRecordRow& legacy) {
    auto space = legacy.partition.find(' ');
    if (space == std::string::npos) return std::nullopt;
    HeldCopyRow row;
    if (hex_decode_to(std::string_view(legacy.partition).substr(0, space),
                      reinterpret_cast<char*>(row.fingerprint.data()),
                      row.fingerprint.size()) != row.fingerprint.size())
        return std::nullopt;
    row.id = legacy.id;
    row.source = legacy.partition.substr(space + 1);
    row.line = legacy.key.secondary;
    row.event_time = legacy.arrival;
    row.bytes = legacy.bytes;
    return row;
}

std::vector<HeldCopyRow> RedisHeldCopies::load(std::string_view name) {
    auto key = held_copies_key(name);
    auto reply = m_session.redis().command({"HGETALL", key}, key);
    std::vector<HeldCopyRow> rows;
    for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
        auto row = decode_held_copy(string_of(reply->element[i]), string_of(reply->element[i + 1]));
        if (!row) throw damaged();
        rows.push_back(std::move(*row));
    }
    for (auto& legacy : m_legacy.load_held(legacy_held_copies_scope(name))) {
        auto row = held_copy_of_legacy(legacy);
        if (!row) throw damaged();
        rows.push_back(std::move(*row));
    }
    std::sort(rows.begin(), rows.end(),
              [](const auto& left, const auto& right) { return left.id < right.id; });
    return rows;
}

void RedisHeldCopies::save(std::string_view name, const HeldCopyChanges& changes) {
    auto key = held_copies_key(name);
    for (const auto& row : changes.held)
        m_session.queue({"HSET", key, std::to_string(row.id), encode_held_copy(row)});
    if (changes.released.empty()) return;
    ReorderChanges legacy;
    legacy.released = changes.released;
    m_legacy.save(legacy_held_copies_scope(name), legacy);
    for (std::size_t begin = 0; begin < changes.released.size(); begin += k_fields_per_command) {
        Arguments arguments{"HDEL", key};
        for (std::size_t i = begin;
             i < std::min(changes.released.size(), begin + k_fields_per_command); ++i)
            arguments.push_back(std::to_string(changes.released[i]));
        m_session.queue(std::move(arguments));
    }
}

void RedisHeldCopies::clear(std::string_view name) {
    m_session.queue({"DEL", held_copies_key(name)});
    m_legacy.clear(legacy_held_copies_scope(name));
}

StoreError RedisHeldCopies::damaged() const {
    return StoreError(
        fmt::format("store {}: a copy held by dedup --keep last is damaged", m_session.describe()));
}

} // namespace idem::store::detail
