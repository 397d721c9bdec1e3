#pragma once
// `idem listen` as a flaky downstream, for users testing their own retry
// logic: which requests fail, are dropped or are answered late. Decisions
// come from the seed and the request's arrival number only, so a run with
// the same seed and the same sequence of requests behaves the same way.

#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>

namespace idem::listen {

struct FlakyPlan {
    int answer_status = 200;             // --respond: what a request that does not fail gets
    double fail_rate = 0;                // --fail-rate: probability of answering fail_status
    int fail_status = 500;               // --fail-status
    double drop_rate = 0;                // --drop-connection-rate: close without answering
    Duration delay{0};                   // --delay: before every answer
    std::optional<Duration> retry_after; // --retry-after: on every non-2xx answer
    std::uint64_t seed = 1;

    [[nodiscard]] bool is_flaky() const { return fail_rate > 0 || drop_rate > 0; }
};

struct FlakyDecision {
    enum class Kind { answer, fail, drop };
    Kind kind = Kind::answer;
    int status = 200; // answer and fail: the status to send
};

// The decision for the request that arrived `request_number`-th (from 1).
[[nodiscard]] FlakyDecision decide(const FlakyPlan& plan, std::uint64_t request_number);

} // namespace idem::listen
