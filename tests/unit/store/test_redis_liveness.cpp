#include "idem/store/redis/redis_liveness.hpp"

#include <doctest/doctest.h>

using namespace idem::store::detail;
using Verdict = OwnerLiveness::Verdict;
using namespace std::chrono_literals;

TEST_CASE("an owner that said goodbye is dead at once") {
    OwnerLiveness liveness;
    CHECK(liveness.judge("a", std::string(k_goodbye), LivenessClock::now()) == Verdict::dead);
}

namespace {
// Looks at `owner` every 100 ms from `from` to `to` (both included), its
// key holding `beat` throughout; the last verdict.
Verdict watch(OwnerLiveness& liveness, const std::string& owner,
              const std::optional<std::string>& beat, LivenessClock::time_point from,
              LivenessClock::duration length) {
    Verdict verdict = Verdict::unsure;
    for (auto at = from; at <= from + length; at += 100ms)
        verdict = liveness.judge(owner, beat, at);
    return verdict;
}
} // namespace

TEST_CASE("an owner whose beat changes is alive, and stays so while it keeps beating") {
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    // One look cannot tell a live owner from one killed a moment ago.
    CHECK(liveness.judge("a", "7", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "7", start + 100ms) == Verdict::unsure);
    CHECK(liveness.judge("a", "8", start + 500ms) == Verdict::alive);
    // Between beats the value stands still: still alive, as it was just seen beating.
    CHECK(liveness.judge("a", "8", start + 700ms) == Verdict::alive);
    CHECK(liveness.judge("a", "9", start + 1000ms) == Verdict::alive);
}

TEST_CASE("a beat that stops changing means its owner died") {
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "3", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "4", start + 400ms) == Verdict::alive);
    CHECK(watch(liveness, "a", "4", start + 500ms, k_silence_is_death - 200ms) == Verdict::alive);
    CHECK(watch(liveness, "a", "4", start + 400ms + k_silence_is_death, 300ms) == Verdict::dead);
    // Killed before it was ever seen beating: silence alone decides.
    CHECK(watch(liveness, "b", "1", start, k_silence_is_death - 100ms) == Verdict::unsure);
    CHECK(watch(liveness, "b", "1", start + k_silence_is_death, 200ms) == Verdict::dead);
}

TEST_CASE("a key that expires is silence, never a beat, and never death at once") {
    // A failover of the key's master: the replica taking over may not
    // have the key, or it expired while its owner could not reach the node.
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "5", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "6", start + 500ms) == Verdict::alive);
    CHECK(liveness.judge("a", std::nullopt, start + 600ms) == Verdict::unsure); // no beat
    CHECK(watch(liveness, "a", std::nullopt, start + 700ms, 2s) == Verdict::unsure);
    CHECK(liveness.judge("a", "7", start + 2800ms) == Verdict::alive); // beating again there
    // A killed owner's key expires: dead once the absence lasts.
    CHECK(watch(liveness, "b", "1", start, 1s) == Verdict::unsure);
    CHECK(watch(liveness, "b", std::nullopt, start + 1100ms, k_silence_is_death - 200ms) ==
          Verdict::unsure);
    CHECK(watch(liveness, "b", std::nullopt, start + 1100ms + k_silence_is_death, 200ms) ==
          Verdict::dead);
}

TEST_CASE("time the observer did not look is neither silence nor a beat") {
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "1", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "2", start + 500ms) == Verdict::alive);
    // The next look comes 10 s later (a read that waited out a failover):
    // the key stood still, or is gone, since; the owner could not beat
    // there either. Watched afresh.
    CHECK(liveness.judge("a", "2", start + 10s) == Verdict::unsure);
    CHECK(watch(liveness, "a", "2", start + 10100ms, k_silence_is_death - 200ms) ==
          Verdict::unsure);
    CHECK(liveness.judge("a", "3", start + 10s + k_silence_is_death) == Verdict::alive);
    // And a dead owner is not taken for alive by a value that changed
    // while nobody looked.
    CHECK(liveness.judge("b", "1", start) == Verdict::unsure);
    CHECK(liveness.judge("b", "9", start + 10s) == Verdict::unsure);
    CHECK(watch(liveness, "b", "9", start + 10100ms, k_silence_is_death + 200ms) == Verdict::dead);
}

TEST_CASE("owners are judged apart") {
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "1", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "2", start + 500ms) == Verdict::alive);
    CHECK(liveness.judge("b", "2", start + 500ms) == Verdict::unsure);
}
