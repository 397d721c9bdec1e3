#include "idem/store/detail/redis_verdicts.hpp"

#include "idem/store/detail/redis_text.hpp"

#include <charconv>
#include <fmt/format.h>

namespace idem::store::detail {

std::string verdicts_key(std::string_view scope) {
    return fmt::format("idem:verdicts:{{{}}}", scope);
}

std::string verdict_field(const VerdictRecord& verdict) {
    return fmt::format("{} {}", verdict.line, verdict.source);
}

std::string encode_verdict(const VerdictRecord& verdict) {
    return fmt::format("{} {} {} {}\n{}{}{}", verdict.valid ? 1 : 0,
                       verdict.checked_at.time_since_epoch().count(), verdict.scheme.size(),
                       verdict.message_id.size(), verdict.scheme, verdict.message_id,
                       verdict.reason);
}

std::optional<VerdictRecord> decode_verdict(std::string_view field, std::string_view value) {
    VerdictRecord verdict;
    if (!read_number(field, verdict.line, ' ')) return std::nullopt;
    verdict.source = field;
    int valid = 0;
    std::int64_t checked = 0;
    std::size_t scheme_size = 0, id_size = 0;
    if (!read_number(value, valid, ' ') || !read_number(value, checked, ' ') ||
        !read_number(value, scheme_size, ' ') || !read_number(value, id_size, '\n') ||
        value.size() < scheme_size + id_size)
        return std::nullopt;
    verdict.valid = valid != 0;
    verdict.checked_at = Timestamp(Duration(checked));
    verdict.scheme = value.substr(0, scheme_size);
    verdict.message_id = value.substr(scheme_size, id_size);
    verdict.reason = value.substr(scheme_size + id_size);
    return verdict;
}

} // namespace idem::store::detail
