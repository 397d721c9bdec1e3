#include "idem/store/redis/redis_liveness.hpp"

#include <doctest/doctest.h>

using namespace idem::store::detail;
using Verdict = OwnerLiveness::Verdict;
using namespace std::chrono_literals;

TEST_CASE("an owner that said goodbye is dead at once") {
    OwnerLiveness liveness;
    CHECK(liveness.judge("a", std::string(k_goodbye), LivenessClock::now()) == Verdict::dead);
}

TEST_CASE("an owner without a heartbeat key is silent, not dead, until the silence lasts") {
    // A failover of the key's master: the replica taking over may not have
    // the key, or it expired while its owner could not reach the node.
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "5", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "6", start + 500ms) == Verdict::alive);
    CHECK(liveness.judge("a", std::nullopt, start + 4s) == Verdict::alive); // gone from the node
    CHECK(liveness.judge("a", std::nullopt, start + 5s) == Verdict::alive);
    CHECK(liveness.judge("a", "7", start + 6s) == Verdict::alive); // beating again there
    CHECK(liveness.judge("b", std::nullopt, start) == Verdict::unsure);
    CHECK(liveness.judge("b", std::nullopt, start + k_silence_is_death + 1ms) == Verdict::dead);
}

TEST_CASE("time the observer could not read the key is not silence") {
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "1", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "2", start + 500ms) == Verdict::alive);
    // The key's master failed over: the read waited 10 s, the owner could
    // not beat there either.
    liveness.observation_gap("a", start + 10s);
    CHECK(liveness.judge("a", "2", start + 10s) == Verdict::alive);
    CHECK(liveness.judge("a", "2", start + 10s + k_silence_is_death) == Verdict::alive);
    CHECK(liveness.judge("a", "2", start + 10s + k_silence_is_death + 1ms) == Verdict::dead);
}

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
    CHECK(liveness.judge("a", "4", start + 400ms + k_silence_is_death) == Verdict::alive);
    CHECK(liveness.judge("a", "4", start + 401ms + k_silence_is_death) == Verdict::dead);
    // Killed before it was ever seen beating: silence alone decides.
    CHECK(liveness.judge("b", "1", start) == Verdict::unsure);
    CHECK(liveness.judge("b", "1", start + k_silence_is_death + 1ms) == Verdict::dead);
}

TEST_CASE("owners are judged apart") {
    OwnerLiveness liveness;
    auto start = LivenessClock::now();
    CHECK(liveness.judge("a", "1", start) == Verdict::unsure);
    CHECK(liveness.judge("a", "2", start + 500ms) == Verdict::alive);
    CHECK(liveness.judge("b", "2", start + 500ms) == Verdict::unsure);
}
