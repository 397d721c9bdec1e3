#include "idem/audit/explain.hpp"

#include <doctest/doctest.h>
#include <tuple>

using namespace idem;
using namespace idem::audit;

namespace {

Timestamp at(double seconds) {
    return Timestamp(Duration(static_cast<Duration::rep>(seconds * 1e6)));
}

// Records of one group: key, source, payload, time.
std::vector<Attempt> records(std::initializer_list<std::tuple<int, int, int, double>> rows) {
    std::vector<Attempt> attempts;
    for (auto [key, source, payload, seconds] : rows)
        attempts.push_back({static_cast<std::uint32_t>(key), 1, static_cast<std::uint32_t>(source),
                            static_cast<std::uint32_t>(payload), at(seconds)});
    return attempts;
}

std::vector<Cause> causes_of(GroupKind kind, const std::vector<Attempt>& attempts,
                             ExplainOptions options = {}) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < attempts.size(); ++i)
        members.push_back(i);
    std::vector<Cause> causes;
    for (const auto& evidence : explain(kind, members, attempts, options).causes)
        causes.push_back(evidence.cause);
    return causes;
}

} // namespace

TEST_CASE("retry-storm: three attempts or more from one source with backoff-like gaps") {
    // Exponential backoff: 1s, 2s, 4s.
    CHECK(causes_of(GroupKind::key,
                    records({{1, 1, 1, 0}, {1, 1, 1, 1}, {1, 1, 1, 3}, {1, 1, 1, 7}})) ==
          std::vector{Cause::retry_storm});
    // Nested layers interleave short and long gaps; the envelope grows.
    auto nested = records(
        {{1, 1, 1, 0}, {1, 1, 1, 5}, {1, 1, 1, 25}, {1, 1, 1, 30}, {1, 1, 1, 90}, {1, 1, 1, 95}});
    CHECK(causes_of(GroupKind::key, nested) == std::vector{Cause::retry_storm});
    // A steady poll every 10 s is not a backoff; two attempts are not a storm.
    CHECK(causes_of(GroupKind::key,
                    records({{1, 1, 1, 0}, {1, 1, 1, 10}, {1, 1, 1, 20}, {1, 1, 1, 30}})) ==
          std::vector{Cause::unexplained});
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 1, 1, 10}})) ==
          std::vector{Cause::unexplained});
    // Three attempts, but from three sources.
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 2, 1, 2}, {1, 3, 1, 10}})) ==
          std::vector{Cause::unexplained});
}

TEST_CASE("retry-storm evidence names the source and its gaps") {
    auto attempts = records({{1, 7, 1, 0}, {1, 7, 1, 1}, {1, 7, 1, 3}});
    auto group = explain(GroupKind::key, {0, 1, 2}, attempts, {});
    REQUIRE(group.causes.size() == 1);
    CHECK(group.causes[0].source == 7);
    CHECK(group.causes[0].gaps ==
          std::vector<Duration>{std::chrono::seconds(1), std::chrono::seconds(2)});
    CHECK(group.causes[0].records == std::vector<std::size_t>{0, 1, 2});
}

TEST_CASE("concurrent: different sources within the race window; one source never races itself") {
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 2, 1, 0.04}})) ==
          std::vector{Cause::concurrent});
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 1, 1, 0.04}})) ==
          std::vector{Cause::unexplained});
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 2, 1, 1.5}})) ==
          std::vector{Cause::unexplained});
    ExplainOptions wide;
    wide.race_window = std::chrono::seconds(2);
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 2, 1, 1.5}}), wide) ==
          std::vector{Cause::concurrent});
}

TEST_CASE("ttl-expired: under one key, a repeat later than the TTL after the record before") {
    ExplainOptions options;
    options.ttl = std::chrono::minutes(5);
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 1, 1, 360}}), options) ==
          std::vector{Cause::ttl_expired});
    CHECK(causes_of(GroupKind::key, records({{1, 1, 1, 0}, {1, 1, 1, 240}}), options) ==
          std::vector{Cause::unexplained});
    // It speaks of keys: a fingerprint group never has it.
    CHECK(causes_of(GroupKind::fingerprint, records({{1, 1, 1, 0}, {2, 1, 1, 360}}), options) ==
          std::vector{Cause::key_regenerated});
}

TEST_CASE("key-reuse: one key, different payloads") {
    auto attempts = records({{1, 1, 1, 0}, {1, 1, 2, 240}, {1, 1, 1, 300}});
    auto group = explain(GroupKind::key, {0, 1, 2}, attempts, {});
    REQUIRE(group.causes.size() == 1);
    CHECK(group.causes[0].cause == Cause::key_reuse);
    CHECK(group.causes[0].records == std::vector<std::size_t>{0, 1});
    CHECK(group.payloads == 2);
}

TEST_CASE("key-regenerated: one intent under several keys within the window") {
    ExplainOptions options;
    options.window = std::chrono::hours(24);
    CHECK(causes_of(GroupKind::fingerprint, records({{1, 1, 1, 0}, {2, 1, 1, 14 * 3600}}),
                    options) == std::vector{Cause::key_regenerated});
    // Two days apart: a new intent that happens to look the same.
    CHECK(causes_of(GroupKind::fingerprint, records({{1, 1, 1, 0}, {2, 1, 1, 48 * 3600}}),
                    options) == std::vector{Cause::unexplained});
}

TEST_CASE("a group's facts: time order, gaps, sources, first and last") {
    auto attempts = records({{1, 2, 1, 30}, {1, 1, 1, 10}, {1, 2, 1, 20}});
    auto group = explain(GroupKind::key, {0, 1, 2}, attempts, {});
    CHECK(group.records == std::vector<std::size_t>{1, 2, 0});
    CHECK(group.sources == std::vector<std::uint32_t>{1, 2});
    CHECK(group.gaps == std::vector<Duration>{std::chrono::seconds(10), std::chrono::seconds(10)});
    CHECK(group.first == at(10));
    CHECK(group.last == at(30));
    CHECK(parse_cause("ttl-expired") == Cause::ttl_expired);
    CHECK_FALSE(parse_cause("ttl_expired"));
}

TEST_CASE("retried-after-failure: the same sender again after a 5xx, 408, 429 or no answer") {
    // Even gaps: no backoff, so no retry-storm; the failures alone explain it.
    auto attempts = records({{1, 1, 1, 0}, {1, 1, 1, 1}, {1, 1, 1, 2}});
    attempts[0].status = 503;
    attempts[1].status = k_no_answer;
    attempts[2].status = 200;
    auto group = explain(GroupKind::key, {0, 1, 2}, attempts, {});
    REQUIRE(group.causes.size() == 1);
    CHECK(group.causes[0].cause == Cause::retried_after_failure);
    CHECK(group.causes[0].records == std::vector<std::size_t>{0, 1, 2});
    CHECK(group.causes[0].gaps.size() == 2);
    // A 2xx or 4xx answer asks for no retry: a repeat after it is something else.
    attempts[0].status = 200;
    attempts[1].status = 404;
    CHECK(causes_of(GroupKind::key, attempts) == std::vector<Cause>{Cause::unexplained});
    // Another sender's failure does not explain this sender's repeat.
    auto two = records({{1, 1, 1, 0}, {1, 2, 1, 30}});
    two[0].status = 503;
    CHECK(causes_of(GroupKind::key, two) == std::vector<Cause>{Cause::unexplained});
    for (int status : {408, 429, 500, 599})
        CHECK(is_failed_answer(static_cast<std::uint16_t>(status)));
    for (int status : {0, 200, 400, 404, 409})
        CHECK_FALSE(is_failed_answer(static_cast<std::uint16_t>(status)));
}
