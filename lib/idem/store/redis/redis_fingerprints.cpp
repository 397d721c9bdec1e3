#include "idem/store/redis/redis_fingerprints.hpp"

#include "idem/store/redis/redis_text.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::store::detail {

namespace {

constexpr std::string_view k_fingerprint_prefix = "idem:fp:";

} // namespace

std::string fingerprint_key(std::string_view scope, const FingerprintBytes& fingerprint) {
    static constexpr char k_hex[] = "0123456789abcdef";
    std::string key = fmt::format("{}{{{}:", k_fingerprint_prefix, scope);
    for (auto byte : fingerprint) {
        key += k_hex[byte >> 4];
        key += k_hex[byte & 0xf];
    }
    key += '}';
    return key;
}

bool fingerprint_of(std::string_view key, FingerprintBytes& fingerprint) {
    auto colon = key.rfind(':');
    if (colon == std::string_view::npos || key.size() != colon + 1 + 2 * fingerprint.size() + 1 ||
        key.back() != '}')
        return false;
    for (std::size_t i = 0; i < fingerprint.size(); ++i) {
        unsigned value = 0;
        const auto* at = key.data() + colon + 1 + 2 * i;
        auto [next, error] = std::from_chars(at, at + 2, value, 16);
        if (error != std::errc{} || next != at + 2) return false;
        fingerprint[i] = static_cast<std::uint8_t>(value);
    }
    return true;
}

std::string shared_evidence_key(std::string_view fingerprint_key) {
    return fmt::format("idem:dups:{}", fingerprint_key.substr(k_fingerprint_prefix.size()));
}

std::string evidence_key(std::string_view fingerprint_key, const FirstCopy& first) {
    auto shared = shared_evidence_key(fingerprint_key);
    if (first.owner == k_no_owner) return shared;
    return fmt::format("{}:{}:{}:{}:{}", shared, first.first_seen_us, first.line, first.batch,
                       first.owner);
}

std::string not_kept_key(std::string_view fingerprint_key, const FirstCopy& first) {
    constexpr std::string_view k_evidence_prefix = "idem:dups:";
    return fmt::format("idem:notkept:{}",
                       evidence_key(fingerprint_key, first).substr(k_evidence_prefix.size()));
}

std::string confirmed_key(std::string_view owner) {
    return fmt::format("idem:confirmed:{}", owner);
}

std::string encode_first_copy(const FirstCopy& first) {
    return fmt::format("{} {} {} {} {} {}", first.first_seen_us, first.line, first.batch,
                       first.expires_ms, first.owner, first.source);
}

std::optional<FirstCopy> decode_first_copy(std::string_view value) {
    FirstCopy first;
    if (!read_number(value, first.first_seen_us, ' ') || !read_number(value, first.line, ' ') ||
        !read_number(value, first.batch, ' ') || !read_number(value, first.expires_ms, ' ') ||
        first.expires_ms < 0)
        return std::nullopt;
    auto space = value.find(' ');
    if (space == 0 || space == std::string_view::npos) return std::nullopt;
    first.owner = value.substr(0, space);
    first.source = value.substr(space + 1);
    return first;
}

std::string encode_evidence(std::string_view source, std::uint64_t line, long long event_time_us) {
    return fmt::format("{}:{} {}", source, line, event_time_us);
}

bool decode_evidence(std::string_view entry, FingerprintRecord& record) {
    auto space = entry.rfind(' ');
    if (space == std::string_view::npos) return false;
    auto colon = entry.rfind(':', space);
    if (colon == std::string_view::npos) return false;
    long long micros = 0;
    std::uint64_t line = 0;
    auto [time_end, time_error] =
        std::from_chars(entry.data() + space + 1, entry.data() + entry.size(), micros);
    auto [line_end, line_error] =
        std::from_chars(entry.data() + colon + 1, entry.data() + space, line);
    if (time_error != std::errc{} || time_end != entry.data() + entry.size() ||
        line_error != std::errc{} || line_end != entry.data() + space)
        return false;
    record.source = std::string(entry.substr(0, colon));
    record.line = line;
    record.event_time = Timestamp(Duration(micros));
    return true;
}

MetFirstCopy judge_met_first_copy(const FirstCopy& met, const FingerprintClaim& claim,
                                  std::string_view me, std::uint64_t my_batch,
                                  std::uint64_t owner_confirmed) {
    if (met.owner == me && met.batch == my_batch && met.source == claim.source &&
        met.line == claim.line)
        return MetFirstCopy::mine_again;
    // Timestamps count microseconds (util/time.hpp), as the value does.
    auto window_us = claim.window.count();
    if (window_us != 0 &&
        claim.event_time.time_since_epoch().count() - met.first_seen_us > window_us)
        return MetFirstCopy::claim_anew;
    if (met.owner == k_no_owner || met.owner == me || met.batch <= owner_confirmed)
        return MetFirstCopy::repeat;
    return MetFirstCopy::ask_owner;
}

} // namespace idem::store::detail
