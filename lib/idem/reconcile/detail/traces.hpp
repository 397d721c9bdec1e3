#pragma once
// Internal to reconcile: the stages read from one OTLP JSON traces file
// (--traces), a span of a stage's name being that stage's record.

#include "idem/reconcile/run.hpp"
#include "idem/run/rejects.hpp"

#include <cstddef>
#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace idem::reconcile::detail {

// Every span of a stage's name in an OTLP JSON file (one export request per
// line, or one document): the key is its trace id, the time its start. A
// request whose structure is not OTLP's is rejected whole, a span of a
// stage that cannot be read alone (a missing traceId, a time that is not
// nanoseconds): each counts as a record, so in = reached + rejected.
// Returns the services that sent each stage's spans.
std::vector<std::set<std::string>> read_traces(
    const ReconcileRunOptions& options, run::RejectRouter& rejects,
    const std::function<void(std::size_t stage, std::string_view trace, Timestamp start)>& take);

} // namespace idem::reconcile::detail
