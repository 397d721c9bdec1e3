#include "idem/store/detail/redis_held_copies.hpp"

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

} // namespace idem::store::detail
