#include "idem/io/progress.hpp"

#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>

namespace idem::io {

std::string progress_line(std::uint64_t records, std::uint64_t bytes,
                          std::optional<std::uint64_t> total_bytes,
                          std::chrono::duration<double> elapsed) {
    double seconds = std::max(elapsed.count(), 1e-3);
    auto rate = static_cast<double>(records) / seconds;
    if (!total_bytes || *total_bytes == 0 || bytes == 0)
        return fmt::format("idem: {} records, {} read, {:.0f} records/s", records,
                           format_bytes(bytes), rate);
    auto done = std::min(static_cast<double>(bytes) / static_cast<double>(*total_bytes), 1.0);
    // What is left takes as long per byte as what was read.
    auto left =
        std::chrono::seconds(static_cast<std::int64_t>(std::ceil(seconds * (1.0 - done) / done)));
    return fmt::format("idem: {} records, {} of {} ({:.0f}%), {:.0f} records/s, ETA {}", records,
                       format_bytes(bytes), format_bytes(*total_bytes), done * 100, rate,
                       format_duration(left));
}

} // namespace idem::io
