#pragma once
// Internal to the Redis store: verify's verdicts, one hash per scope
// ("idem:verdicts:{scope}"), a field per record ("LINE SOURCE"), so that a
// rerun over the same file replaces its verdicts.

#include "idem/store/verdicts.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace idem::store::detail {

[[nodiscard]] std::string verdicts_key(std::string_view scope);
[[nodiscard]] std::string verdict_field(const VerdictRecord& verdict);
// "valid checked_us scheme_length message_id_length\n" + scheme +
// message_id + reason.
[[nodiscard]] std::string encode_verdict(const VerdictRecord& verdict);
[[nodiscard]] std::optional<VerdictRecord> decode_verdict(std::string_view field,
                                                          std::string_view value);

} // namespace idem::store::detail
