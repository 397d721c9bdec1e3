#pragma once
// Where a test stops the process as a SIGKILL would (docs/architecture.md,
// "The crash guarantee"; tests/e2e/harness.py KillAndRerun): at the N-th
// record a run frame counts, or at the K-th commit of a run's owned
// outputs (the last one, whose checkpoint is finished, included), once
// the outputs are synced and the checkpoint written and before the store
// commits. The kill lands at a record count, not at a
// wall-clock time, so a slower build (a sanitizer's) is killed at the same
// points; or where a test interrupts it as Ctrl-C does, at a record count
// too. Set once, before any run, from IDEM_CRASH_AT (cli/main.cpp),
// never from a flag.

#include <cstdint>
#include <limits>

namespace idem {

// interrupt: at the N-th record the process raises SIGINT, as a person's
// Ctrl-C would (util/interrupt.hpp), and goes on.
enum class CrashAt { nothing, record, commit, interrupt };

void set_crash_point(CrashAt at, std::uint64_t count);

// The record count at which a run frame crashes (the largest number when
// none is set): the frame compares its own count with it.
[[nodiscard]] std::uint64_t crash_record();
// The record count at which a run frame raises SIGINT (the largest number
// when none is set).
[[nodiscard]] std::uint64_t interrupt_record();

// Counts one commit; crashes the process at the K-th when one is set.
void reach_commit();

// Kills the process now, as kill -9 does: no destructor, flush or exit
// handler runs.
[[noreturn]] void crash_now();

} // namespace idem
