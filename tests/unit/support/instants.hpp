#pragma once
// Instants the unit tests write: whole seconds since the epoch, or RFC 3339
// text (one spelling for every test, so a unity batch has one of each).

#include "idem/util/time.hpp"

#include <chrono>
#include <string_view>

namespace idem::test {

[[nodiscard]] inline Timestamp unix_seconds(long long seconds) {
    return Timestamp(std::chrono::seconds(seconds));
}

// Text the test knows to be a timestamp.
[[nodiscard]] inline Timestamp instant(std::string_view text) {
    return *parse_timestamp(text);
}

} // namespace idem::test
