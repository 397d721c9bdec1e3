#include "idem/io/block_reader.hpp"
#include "idem/listen/flaky.hpp"
#include "idem/record/envelope_writer.hpp"
#include "idem/record/parser.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace idem;
using namespace idem::listen;

TEST_CASE("flaky decisions are reproducible from the seed and close to the rates") {
    FlakyPlan plan;
    plan.fail_rate = 0.3;
    plan.drop_rate = 0.1;
    plan.fail_status = 503;
    plan.seed = 42;
    int failed = 0;
    int dropped = 0;
    for (std::uint64_t n = 1; n <= 10000; ++n) {
        auto decision = decide(plan, n);
        CHECK(decide(plan, n).kind == decision.kind);
        if (decision.kind == FlakyDecision::Kind::fail) {
            ++failed;
            CHECK(decision.status == 503);
        }
        if (decision.kind == FlakyDecision::Kind::drop) ++dropped;
    }
    CHECK(dropped > 900);
    CHECK(dropped < 1100);
    // A failure is drawn among the requests that were not dropped.
    CHECK(failed > 2500);
    CHECK(failed < 2900);
    FlakyPlan other = plan;
    other.seed = 43;
    int differ = 0;
    for (std::uint64_t n = 1; n <= 100; ++n)
        differ += decide(plan, n).kind != decide(other, n).kind;
    CHECK(differ > 10);
}

TEST_CASE("without flaky rates every request gets the normal answer") {
    FlakyPlan plan;
    plan.answer_status = 202;
    for (std::uint64_t n = 1; n <= 100; ++n) {
        CHECK(decide(plan, n).kind == FlakyDecision::Kind::answer);
        CHECK(decide(plan, n).status == 202);
    }
}
