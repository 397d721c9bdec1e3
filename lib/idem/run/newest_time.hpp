#pragma once
// The newest event time in a run's inputs: where `--since 2h` (a duration
// back from the newest record) counts from. It costs a read of every input
// before the run reads them again, so the inputs must be files.

#include "idem/record/field_path.hpp"
#include "idem/run/input.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include <optional>

namespace idem::run {

// Every record's event time (record/event_time.hpp) in `input`, the
// newest: nullopt when no record has one. Records that cannot be read or
// timed are passed over here; the run proper rejects them. Throws
// UsageError when an input is standard input or a pipe, which cannot be
// read twice.
[[nodiscard]] std::optional<Timestamp> newest_event_time(const InputOptions& input,
                                                         const record::FieldPath* time_field,
                                                         const TimeZone* zone);

} // namespace idem::run
