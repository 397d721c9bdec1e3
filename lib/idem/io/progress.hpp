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

} // namespace idem::io
