#pragma once
// The one line a long run shows on a terminal (cli/common.cpp
// StderrDiagnostics): records, bytes read, a percentage and an ETA when
// the inputs' size is known (compressed inputs by their compressed bytes,
// read and total alike), and the rate.

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

namespace idem::io {

[[nodiscard]] std::string progress_line(std::uint64_t records, std::uint64_t bytes,
                                        std::optional<std::uint64_t> total_bytes,
                                        std::chrono::duration<double> elapsed);

// When the line is drawn: at the first report (one comes every 65,536
// records, so a run long enough to have one shows it however fast it
// goes), then at most once per `interval`, since a terminal redrawn faster
// only flickers.
class ProgressPacer {
public:
    using Clock = std::chrono::steady_clock;
    explicit ProgressPacer(Clock::duration interval = std::chrono::milliseconds(250))
        : m_interval(interval) {}

    // Whether a report at `now` draws the line (and counts as drawn).
    [[nodiscard]] bool due(Clock::time_point now) {
        if (m_last_drawn && now - *m_last_drawn < m_interval) return false;
        m_last_drawn = now;
        return true;
    }

private:
    Clock::duration m_interval;
    std::optional<Clock::time_point> m_last_drawn;
};

} // namespace idem::io
