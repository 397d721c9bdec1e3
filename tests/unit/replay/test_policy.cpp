#include "idem/replay/policy.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::replay;
using namespace std::chrono_literals;

namespace {

Judgement judge_status(int status, std::string retry_after = "",
                       KeyUse key_use = KeyUse::with_key) {
    AttemptResult result;
    result.status = status;
    result.retry_after = std::move(retry_after);
    RetryRules rules;
    rules.key_use = key_use;
    rules.max_retry_after = 60s;
    return judge_attempt(result, rules, Timestamp(1'000'000'000s));
}

} // namespace

TEST_CASE("2xx completes, retryable statuses retry, other statuses fail for good") {
    for (int status : {200, 201, 202, 204, 299})
        CHECK(judge_status(status).verdict == Judgement::Verdict::completed);
    for (int status : {500, 502, 503, 504, 408, 425, 429})
        CHECK(judge_status(status).verdict == Judgement::Verdict::retry);
    for (int status : {301, 400, 401, 403, 404, 409, 410, 422}) {
        auto judgement = judge_status(status);
        CHECK(judgement.verdict == Judgement::Verdict::failed_for_good);
        CHECK(judgement.error == "http " + std::to_string(status));
    }
}

TEST_CASE("Retry-After counts on 429 and 503 only, capped by the rule") {
    CHECK(judge_status(429, "7").wait_at_least == Duration(7s));
    CHECK(judge_status(503, "7").wait_at_least == Duration(7s));
    CHECK_FALSE(judge_status(500, "7").wait_at_least);
    CHECK(judge_status(429, "3600").wait_at_least == Duration(60s));
    CHECK_FALSE(judge_status(429, "soon").wait_at_least);
}

TEST_CASE("Retry-After is delay-seconds or an IMF-fixdate") {
    // 1994-11-06T08:49:37Z, the example in RFC 9110 section 5.6.7.
    auto now = Timestamp(784111777s) - 30s;
    CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now) == Duration(30s));
    CHECK(parse_retry_after("Sun, 06 Nov 1994 08:49:37 GMT", now + 60s) == Duration(0));
    CHECK(parse_retry_after(" 120 ", now) == Duration(120s));
    CHECK_FALSE(parse_retry_after("Sunday, 06-Nov-94 08:49:37 GMT", now));
    CHECK_FALSE(parse_retry_after("-5", now));
    CHECK_FALSE(parse_retry_after("Sun, 31 Feb 1994 08:49:37 GMT", now));
}

TEST_CASE("a request lost after sending is retried only when it carried a key") {
    AttemptResult lost;
    lost.transport = AttemptResult::Transport::lost_after_send;
    lost.error = "Timeout was reached";
    RetryRules rules;
    CHECK(judge_attempt(lost, rules, Timestamp{}).verdict == Judgement::Verdict::retry);
    rules.key_use = KeyUse::without_key;
    auto judgement = judge_attempt(lost, rules, Timestamp{});
    CHECK(judgement.verdict == Judgement::Verdict::failed_for_good);
    CHECK(judgement.error == "Timeout was reached (sent without a key: not retried)");
    AttemptResult refused;
    refused.transport = AttemptResult::Transport::not_sent;
    CHECK(judge_attempt(refused, rules, Timestamp{}).verdict == Judgement::Verdict::retry);
}

TEST_CASE("backoff doubles up to its cap, with full jitter below that ceiling") {
    auto backoff = parse_backoff("1s..60s");
    CHECK(backoff_delay(backoff, 1, 0.999999) < Duration(1s));
    CHECK(backoff_delay(backoff, 3, 0.5) == Duration(2s));
    CHECK(backoff_delay(backoff, 7, 0.5) == Duration(30s));
    CHECK(backoff_delay(backoff, 4'000'000'000U, 0.5) == Duration(30s));
    CHECK(backoff_delay(backoff, 2, 0.0) == Duration(0));
    CHECK_THROWS_AS((void)parse_backoff("5s"), UsageError);
    CHECK_THROWS_AS((void)parse_backoff("10s..1s"), UsageError);
}

TEST_CASE("the retry budget allows a share of first attempts plus a floor") {
    RetryBudget budget(0.1, 2);
    for (int i = 0; i < 30; ++i)
        budget.count_first_attempt();
    int allowed = 0;
    while (budget.try_spend())
        ++allowed;
    CHECK(allowed == 5); // 2 + 10% of 30
    CHECK(budget.exhausted_once());
    for (int i = 0; i < 10; ++i)
        budget.count_first_attempt();
    CHECK(budget.try_spend()); // 40 first attempts: one more
    CHECK_FALSE(budget.try_spend());
}
