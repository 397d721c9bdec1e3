#pragma once
// Flags `listen` and `replay` share: shares and probabilities, HTTP timeouts.

#include "idem/net/http_client.hpp"

#include <string_view>

namespace idem::cli {

// "10%" or "0.1"; at least 0. Throws UsageError naming `flag`.
[[nodiscard]] double parse_share(std::string_view flag, std::string_view text);

// A share that is a probability: between 0 and 1 (0% and 100%).
[[nodiscard]] double parse_probability(std::string_view flag, std::string_view text);

// "connect=2s,total=30s" (either part may be left out).
[[nodiscard]] net::Timeouts parse_timeouts(std::string_view flag, std::string_view text);

} // namespace idem::cli
