#pragma once
// The verdict role: what `verify --keep-verdicts` judged, by record, for
// `audit --verdicts` to put beside the same record.

#include "idem/util/time.hpp"
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

// The scope verify keeps its verdicts under and audit reads them from.
inline constexpr std::string_view k_verdict_scope = "verify";

// One verdict `verify --keep-verdicts` kept, by where its record was:
// `audit --verdicts` puts it beside the same record.
struct VerdictRecord {
    std::string source;
    std::uint64_t line = 0;
    bool valid = false;
    std::string scheme;
    std::string message_id; // the delivery's id, when the scheme has one
    std::string reason;
    Timestamp checked_at;
};

class VerdictStore {
public:
    virtual ~VerdictStore() = default;

    // Verdicts within `scope`, saved within the transaction commit() ends;
    // one for a record already kept (same source and line) replaces it.
    virtual void save_verdicts(std::string_view scope,
                               const std::vector<VerdictRecord>& verdicts) = 0;
    virtual void for_each_verdict(std::string_view scope,
                                  const std::function<void(const VerdictRecord&)>& visit) = 0;
};

} // namespace idem::store
