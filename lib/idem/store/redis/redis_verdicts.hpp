#pragma once
// Internal to the Redis store: verify's verdicts, one hash per scope
// ("idem:verdicts:{scope}"), a field per record ("LINE SOURCE"), so that a
// rerun over the same file replaces its verdicts.

#include "idem/store/redis/redis_session.hpp"
#include "idem/store/verdicts.hpp"

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store::detail {

[[nodiscard]] std::string verdicts_key(std::string_view scope);
[[nodiscard]] std::string verdict_field(const VerdictRecord& verdict);
// "valid checked_us scheme_length message_id_length\n" + scheme +
// message_id + reason.
[[nodiscard]] std::string encode_verdict(const VerdictRecord& verdict);
[[nodiscard]] std::optional<VerdictRecord> decode_verdict(std::string_view field,
                                                          std::string_view value);

// verify's role: the verdicts kept per scope.
class RedisVerdicts {
public:
    explicit RedisVerdicts(RedisSession& session) : m_session(session) {}

    // Queued, and applied in one MULTI/EXEC by the store's commit().
    void save(std::string_view scope, const std::vector<VerdictRecord>& verdicts);
    // HSCAN, a page at a time: a scope may hold millions.
    void for_each(std::string_view scope, const std::function<void(const VerdictRecord&)>& visit);

private:
    RedisSession& m_session;
};

} // namespace idem::store::detail
