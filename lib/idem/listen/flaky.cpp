// Seeded, stateless decisions for the flaky modes.

#include "idem/listen/flaky.hpp"

namespace idem::listen {

namespace {

// SplitMix64: a full-period mix, so consecutive request numbers give
// unrelated draws.
std::uint64_t mix(std::uint64_t value) {
    value += 0x9E3779B97F4A7C15ULL;
    value = (value ^ (value >> 30)) * 0xBF58476D1CE4E5B9ULL;
    value = (value ^ (value >> 27)) * 0x94D049BB133111EBULL;
    return value ^ (value >> 31);
}

// A draw in [0, 1) for one request and one purpose.
double draw(std::uint64_t seed, std::uint64_t request_number, std::uint64_t purpose) {
    auto bits = mix(mix(seed ^ (purpose * 0xD6E8FEB86659FD93ULL)) ^ request_number);
    return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

} // namespace

FlakyDecision decide(const FlakyPlan& plan, std::uint64_t request_number) {
    FlakyDecision decision;
    decision.status = plan.answer_status;
    if (plan.drop_rate > 0 && draw(plan.seed, request_number, 1) < plan.drop_rate) {
        decision.kind = FlakyDecision::Kind::drop;
        decision.status = 0;
    } else if (plan.fail_rate > 0 && draw(plan.seed, request_number, 2) < plan.fail_rate) {
        decision.kind = FlakyDecision::Kind::fail;
        decision.status = plan.fail_status;
    }
    return decision;
}

} // namespace idem::listen
