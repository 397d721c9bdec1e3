#include "idem/util/crash_point.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace idem {

namespace {
// Set once before any run starts; commits happen on the run's own thread.
CrashAt g_crash_at = CrashAt::nothing;
std::uint64_t g_crash_count = 0;
std::atomic<std::uint64_t> g_commits{0};
} // namespace

void set_crash_point(CrashAt at, std::uint64_t count) {
    g_crash_at = at;
    g_crash_count = count;
}

std::uint64_t crash_record() {
    return g_crash_at == CrashAt::record ? g_crash_count
                                         : std::numeric_limits<std::uint64_t>::max();
}

std::uint64_t interrupt_record() {
    return g_crash_at == CrashAt::interrupt ? g_crash_count
                                            : std::numeric_limits<std::uint64_t>::max();
}

void reach_commit() {
    if (g_crash_at != CrashAt::commit) return;
    if (g_commits.fetch_add(1, std::memory_order_relaxed) + 1 == g_crash_count) crash_now();
}

void crash_now() {
    std::raise(SIGKILL);
    std::abort(); // SIGKILL cannot be caught: never reached
}

} // namespace idem
