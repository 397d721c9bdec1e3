#pragma once
// A window of event time (record/event_time.hpp says what a record's is).

#include "idem/util/time.hpp"

#include <optional>

namespace idem::record {

// --since/--until: the records whose event time lies in [since, until), so
// a postmortem reads only the incident's window. Records outside it are
// counted (outside_range), neither output nor rejected; a record with no
// event time cannot be placed and is rejected (untimed_reason).
struct TimeWindow {
    std::optional<Timestamp> since;
    std::optional<Timestamp> until;

    [[nodiscard]] bool active() const { return since || until; }
    [[nodiscard]] bool contains(Timestamp time) const {
        return (!since || time >= *since) && (!until || time < *until);
    }
};

} // namespace idem::record
