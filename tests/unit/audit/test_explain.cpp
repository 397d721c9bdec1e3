#include "idem/audit/explain.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <tuple>

using namespace idem;
using namespace idem::audit;

namespace {

Timestamp at_seconds(double seconds) {
    return Timestamp(Duration(static_cast<Duration::rep>(seconds * 1e6)));
}

// Records of one group: key, source, payload, time.
std::vector<Attempt> records(std::initializer_list<std::tuple<int, int, int, double>> rows) {
    std::vector<Attempt> attempts;
    for (auto [key, source, payload, seconds] : rows) {
        Attempt attempt;
        attempt.key = static_cast<std::uint32_t>(key);
        attempt.fingerprint = 1;
        attempt.source = static_cast<std::uint32_t>(source);
        attempt.payload = static_cast<std::uint32_t>(payload);
        attempt.time = at_seconds(seconds);
        attempts.push_back(attempt);
    }
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

TEST_CASE("ttl-expired: under one key, a copy later than the TTL after the key's claim") {
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

TEST_CASE("ttl-expired runs from the claim, as dedup and --what-if do") {
    // The 5-minute-key incident: copies at 0, 4 and 8 minutes. The copy at 4
    // is caught and leaves the claim as it is; the one at 8 comes 8m after the
    // claim, past 5m, though only 4m after the copy before it.
    ExplainOptions options;
    options.ttl = std::chrono::minutes(5);
    auto attempts = records({{1, 1, 1, 0}, {1, 1, 1, 240}, {1, 1, 1, 480}});
    auto group = explain(GroupKind::key, {0, 1, 2}, attempts, options);
    REQUIRE(group.causes.size() == 1);
    CHECK(group.causes[0].cause == Cause::ttl_expired);
    CHECK(group.causes[0].records == std::vector<std::size_t>{0, 2});
    CHECK(group.causes[0].gaps == std::vector<Duration>{std::chrono::minutes(8)});
    // The copy that passed claims anew: 3m after it is caught again.
    attempts = records({{1, 1, 1, 0}, {1, 1, 1, 360}, {1, 1, 1, 540}, {1, 1, 1, 720}});
    group = explain(GroupKind::key, {0, 1, 2, 3}, attempts, options);
    REQUIRE(group.causes.size() == 1);
    CHECK(group.causes[0].records == std::vector<std::size_t>{0, 1, 3});
    CHECK(group.causes[0].gaps ==
          std::vector<Duration>{std::chrono::minutes(6), std::chrono::minutes(6)});
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
    CHECK(group.first == at_seconds(10));
    CHECK(group.last == at_seconds(30));
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

namespace {

// One provider's copies of one delivery: (seconds, status), one endpoint.
std::vector<Attempt> deliveries(Provider provider,
                                std::initializer_list<std::pair<double, std::uint16_t>> rows) {
    std::vector<Attempt> attempts;
    for (auto [seconds, status] : rows) {
        Attempt attempt;
        attempt.key = 1;
        attempt.payload = 1;
        attempt.time = at_seconds(seconds);
        attempt.status = status;
        attempt.trace.provider = provider;
        attempt.trace.endpoint = 1;
        attempts.push_back(attempt);
    }
    return attempts;
}

Explanation explained(const std::vector<Attempt>& attempts, ExplainOptions options = {}) {
    std::vector<std::size_t> members;
    for (std::size_t i = 0; i < attempts.size(); ++i)
        members.push_back(i);
    return explain(GroupKind::key, members, attempts, options);
}

const Evidence* evidence_of(const Explanation& group, Cause cause) {
    for (const auto& evidence : group.causes)
        if (evidence.cause == cause) return &evidence;
    return nullptr;
}

} // namespace

TEST_CASE("provider-retry: the waits fit the provider's published schedule") {
    // Svix (docs.svix.com/retries): immediately, 5 s, 5 min, 30 min after
    // each failure. Each wait also holds the provider's wait for an answer.
    auto group =
        explained(deliveries(Provider::svix, {{0, 500}, {5.4, 500}, {305.9, 503}, {2110, 200}}));
    const auto* retry = evidence_of(group, Cause::provider_retry);
    REQUIRE(retry);
    CHECK(retry->attempt_numbers == std::vector<std::uint16_t>{1, 2, 3, 4});
    CHECK(retry->detail.find("svix") != std::string::npos);
    // A copy the log never saw: 5 s + 5 min in one wait is attempts 1 and 3.
    group = explained(deliveries(Provider::svix, {{0, 0}, {306, 0}}));
    retry = evidence_of(group, Cause::provider_retry);
    REQUIRE(retry);
    CHECK(retry->attempt_numbers == std::vector<std::uint16_t>{1, 3});
    // 47 s fits no sum of Svix's delays: someone else sent it again.
    CHECK_FALSE(evidence_of(explained(deliveries(Provider::svix, {{0, 0}, {47, 0}})),
                            Cause::provider_retry));
    // Unknown provider: no schedule to compare with.
    CHECK_FALSE(evidence_of(explained(deliveries(Provider::unknown, {{0, 0}, {5, 0}})),
                            Cause::provider_retry));
}

TEST_CASE("provider-retry: a 2xx answer that was retried anyway arrived too late") {
    // Slack (api.slack.com/apis/events-api): retried at once, after 1 min,
    // after 5 min; it waits 3 s for an answer.
    auto group = explained(deliveries(Provider::slack, {{0, 200}, {3.2, 200}, {64, 200}}));
    const auto* retry = evidence_of(group, Cause::provider_retry);
    REQUIRE(retry);
    CHECK(retry->attempt_numbers == std::vector<std::uint16_t>{1, 2, 3});
    CHECK(retry->detail.find("2xx to attempt 1, 2 yet retried") != std::string::npos);
    CHECK(retry->detail.find("too late") != std::string::npos);
    // Slack's own counter (X-Slack-Retry-Num) is the evidence when present.
    auto counted = deliveries(Provider::slack, {{0, 0}, {900, 0}});
    counted[0].trace.provider_attempt = 1;
    counted[1].trace.provider_attempt = 3;
    auto by_counter = explained(counted);
    retry = evidence_of(by_counter, Cause::provider_retry);
    REQUIRE(retry);
    CHECK(retry->attempt_numbers == std::vector<std::uint16_t>{1, 3});
}

TEST_CASE("provider-retry: GitHub never retries by itself, Stripe within three days") {
    auto redelivered = explained(deliveries(Provider::github, {{0, 0}, {7200, 0}}));
    const auto* retry = evidence_of(redelivered, Cause::provider_retry);
    REQUIRE(retry);
    CHECK(retry->detail.find("redelivered by hand") != std::string::npos);
    // Growing waits within 3 days fit Stripe; a shrinking one does not.
    CHECK(evidence_of(explained(deliveries(Provider::stripe, {{0, 0}, {60, 0}, {3600, 0}})),
                      Cause::provider_retry));
    CHECK_FALSE(evidence_of(explained(deliveries(Provider::stripe, {{0, 0}, {3600, 0}, {3610, 0}})),
                            Cause::provider_retry));
    CHECK_FALSE(evidence_of(explained(deliveries(Provider::stripe, {{0, 0}, {4 * 86400, 0}})),
                            Cause::provider_retry));
}

TEST_CASE("fan-out: one event to several endpoints at nearly the same time") {
    auto attempts = deliveries(Provider::stripe, {{0, 0}, {0.4, 0}, {1.1, 0}});
    attempts[1].trace.endpoint = 2;
    auto group = explained(attempts);
    const auto* fan_out = evidence_of(group, Cause::fan_out);
    REQUIRE(fan_out);
    CHECK(fan_out->records == std::vector<std::size_t>{0, 1});
    CHECK(fan_out->detail == "endpoint");
    // One endpoint, two subscriptions (GitHub hooks, Shopify API versions).
    attempts[1].trace.endpoint = 1;
    attempts[1].trace.subscription = 9;
    auto subscribed = explained(attempts);
    fan_out = evidence_of(subscribed, Cause::fan_out);
    REQUIRE(fan_out);
    CHECK(fan_out->detail == "subscription");
    // Far apart, it is not one fan-out.
    attempts[1].time = at_seconds(600);
    CHECK_FALSE(evidence_of(explained(attempts), Cause::fan_out));
}

TEST_CASE("layered-retry: retry layers multiply") {
    // The seeds' incident: agent x client x gateway, 3 x 2 x 2; seven copies arrived.
    std::vector<std::array<std::uint8_t, 3>> counters{{1, 1, 1}, {1, 1, 2}, {1, 2, 1}, {2, 1, 1},
                                                      {2, 2, 2}, {3, 1, 1}, {3, 1, 2}};
    std::vector<Attempt> attempts;
    for (std::size_t i = 0; i < counters.size(); ++i) {
        Attempt attempt;
        attempt.key = 1;
        attempt.payload = 1;
        attempt.time = at_seconds(static_cast<double>(i) * 20);
        for (std::size_t layer = 0; layer < 3; ++layer)
            attempt.trace.layers[layer] = counters[i][layer];
        attempts.push_back(attempt);
    }
    ExplainOptions options;
    options.layer_names = {"agent", "client", "gateway"};
    auto group = explained(attempts, options);
    const auto* layered = evidence_of(group, Cause::layered_retry);
    REQUIRE(layered);
    CHECK(layered->records.size() == 7);
    CHECK(layered->detail.find("3 (agent) x 2 (client) x 2 (gateway) = up to 12 copies") !=
          std::string::npos);
    CHECK(layered->detail.find("7 arrived") != std::string::npos);
    // Without layer names nothing is read as a layer.
    CHECK_FALSE(evidence_of(explained(attempts), Cause::layered_retry));
}

TEST_CASE("Slack's retry counter is read as the attempt, and nothing else is") {
    auto attempt_of = [](std::optional<std::string_view> retry) {
        std::uint8_t attempt = 0;
        auto provider = provider_of_headers(
            [&](std::string_view name) -> std::optional<std::string_view> {
                if (name == "X-Slack-Signature") return "v0=00";
                if (name == "X-Slack-Retry-Num") return retry;
                return std::nullopt;
            },
            attempt);
        CHECK(provider == Provider::slack);
        return attempt;
    };
    CHECK(attempt_of(std::nullopt) == 1); // the first delivery carries no counter
    CHECK(attempt_of("2") == 3);
    CHECK(attempt_of("100") == 101);
    // Not a count: unknown, never a wrapped-around byte.
    for (auto text : {"0", "101", "300", "1000", "2x", "-1", ""})
        CHECK(attempt_of(std::string_view(text)) == 0);
}

TEST_CASE("a copy carrying an earlier copy's signing is no provider's retry") {
    // Three Stripe copies on one route: a fresh attempt 5 minutes later
    // (its own t=), then the first one's signing again 40 minutes later.
    auto attempts = records({{1, 1, 1, 0}, {1, 1, 1, 300}, {1, 1, 1, 2400}});
    for (auto& attempt : attempts) {
        attempt.trace.provider = Provider::stripe;
        attempt.trace.signed_copy.body = 7;
        attempt.trace.signed_copy.canonical = 8;
    }
    attempts[0].trace.signed_copy.signed_at = 1796029200;
    attempts[1].trace.signed_copy.signed_at = 1796029500;
    attempts[2].trace.signed_copy.signed_at = 1796029200;
    for (auto& attempt : attempts)
        attempt.trace.signed_copy.signature =
            static_cast<std::uint64_t>(attempt.trace.signed_copy.signed_at);
    auto group = explain(GroupKind::key, {0, 1, 2}, attempts, {});
    const Evidence* replayed = nullptr;
    for (const auto& evidence : group.causes)
        if (evidence.cause == Cause::replayed_delivery) replayed = &evidence;
    REQUIRE(replayed != nullptr);
    CHECK(replayed->records == std::vector<std::size_t>{2});
    CHECK(replayed->originals == std::vector<std::size_t>{0});
    CHECK(replayed->gaps == std::vector<Duration>{std::chrono::minutes(40)});
    // The same signing within 2 s may be a fresh one in the same second.
    attempts[2].time = at_seconds(301.5);
    attempts[2].trace.signed_copy.signed_at = 1796029500;
    attempts[2].trace.signed_copy.signature = 1796029500;
    for (const auto& evidence : explain(GroupKind::key, {0, 1, 2}, attempts, {}).causes)
        CHECK(evidence.cause != Cause::replayed_delivery);
    // Other bytes under it: the same JSON is re-serialized, other JSON
    // tampered (and its payload no second intent under the key). The first
    // two stay Stripe's attempts 1 and 2.
    attempts[2].trace.signed_copy.body = 9;
    CHECK(causes_of(GroupKind::key, attempts) ==
          std::vector{Cause::provider_retry, Cause::re_serialized});
    attempts[2].trace.signed_copy.canonical = 10;
    attempts[2].payload = 2;
    CHECK(causes_of(GroupKind::key, attempts) ==
          std::vector{Cause::provider_retry, Cause::tampered});
}

TEST_CASE("verify's words tell a stale copy from one whose bytes changed") {
    CHECK(classify_verdict(true, "signature matches") == SignatureVerdict::valid);
    CHECK(classify_verdict(false, "signature does not match: 1 signature checked against 1 key") ==
          SignatureVerdict::mismatch);
    CHECK(classify_verdict(false, "timestamp 1796029200 is 40m1s old, beyond the 5m tolerance") ==
          SignatureVerdict::stale);
    CHECK(classify_verdict(false, "replayed: this message was already delivered") ==
          SignatureVerdict::stale);
    CHECK(classify_verdict(false, "malformed header 'Stripe-Signature': no t= timestamp") ==
          SignatureVerdict::invalid);
    CHECK(signed_seconds("t=1796029200,v1=abc") == 1796029200);
    CHECK(signed_seconds("1796029200") == 1796029200);
    CHECK(signed_seconds("v1=abc") == 0);
}

TEST_CASE("verify's stale verdict names a replay only where it found another copy fresh") {
    // A verify run long after the capture finds every copy stale: that is
    // verify's clock, not a replay.
    auto attempts = records({{1, 1, 1, 0}, {1, 1, 1, 3600}});
    for (auto& attempt : attempts) {
        attempt.trace.provider = Provider::stripe;
        attempt.trace.signed_copy.verdict = SignatureVerdict::stale;
    }
    attempts[0].trace.signed_copy.signed_at = 1796029200;
    attempts[1].trace.signed_copy.signed_at = 1796032800;
    for (auto cause : causes_of(GroupKind::key, attempts))
        CHECK(cause != Cause::replayed_delivery);
    attempts[0].trace.signed_copy.verdict = SignatureVerdict::valid;
    auto found = causes_of(GroupKind::key, attempts);
    CHECK(std::find(found.begin(), found.end(), Cause::replayed_delivery) != found.end());
}
