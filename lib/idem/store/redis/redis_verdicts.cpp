#include "idem/store/redis/redis_verdicts.hpp"
#include "idem/util/errors.hpp"

#include <algorithm>

#include "idem/store/redis/redis_text.hpp"

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

void RedisVerdicts::save(std::string_view scope, const std::vector<VerdictRecord>& verdicts) {
    auto key = verdicts_key(scope);
    for (std::size_t begin = 0; begin < verdicts.size(); begin += k_fields_per_command) {
        Arguments arguments{"HSET", key};
        for (std::size_t i = begin; i < std::min(verdicts.size(), begin + k_fields_per_command);
             ++i) {
            arguments.push_back(verdict_field(verdicts[i]));
            arguments.push_back(encode_verdict(verdicts[i]));
        }
        m_session.queue(std::move(arguments));
    }
}

void RedisVerdicts::for_each(std::string_view scope,
                             const std::function<void(const VerdictRecord&)>& visit) {
    auto key = verdicts_key(scope);
    std::string cursor = "0";
    do {
        auto page = m_session.redis().command({"HSCAN", key, cursor, "COUNT", "1000"}, key);
        if (page->type != REDIS_REPLY_ARRAY || page->elements != 2)
            throw m_session.unexpected("HSCAN");
        cursor = string_of(page->element[0]);
        const auto* items = page->element[1];
        for (std::size_t i = 0; i + 1 < items->elements; i += 2) {
            auto verdict =
                decode_verdict(string_of(items->element[i]), string_of(items->element[i + 1]));
            if (!verdict)
                throw StoreError(fmt::format("store {}: a verdict of scope {} is damaged",
                                             m_session.describe(), scope));
            visit(*verdict);
        }
    } while (cursor != "0");
}

} // namespace idem::store::detail
