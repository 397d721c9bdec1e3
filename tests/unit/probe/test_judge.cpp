// idem probe's verdicts from what each check observed (probe/check.hpp),
// and its reports in every medium (probe/report.hpp).

#include "idem/probe/check.hpp"
#include "idem/probe/report.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/render.hpp"

#include <doctest/doctest.h>

namespace idem::probe {

namespace {

Answer answered(int status, std::string digest = "d1", int milliseconds = 5) {
    Answer answer;
    answer.label = "copy";
    answer.status = status;
    answer.digest = std::move(digest);
    answer.latency = std::chrono::milliseconds(milliseconds);
    return answer;
}

Observation of(std::vector<Answer> answers, std::optional<std::int64_t> effects = std::nullopt) {
    Observation observed;
    observed.answers = std::move(answers);
    observed.effects = effects;
    return observed;
}

Verdict verdict(Check check, const Observation& observed, JudgeRules rules = {}) {
    return judge(check, observed, rules).verdict;
}

} // namespace

TEST_CASE("sequential-duplicate: 2xx twice or a replayed answer, and one side effect") {
    // Another body for the retry: providers take it, the IETF draft answers
    // a completed request's retry with its first response (a warning).
    CHECK(verdict(Check::sequential_duplicate, of({answered(200), answered(200, "d2")}, 1)) ==
          Verdict::warn);
    CHECK(verdict(Check::sequential_duplicate, of({answered(200), answered(200)})) ==
          Verdict::pass);
    CHECK(verdict(Check::sequential_duplicate, of({answered(200), answered(200)}, 2)) ==
          Verdict::fail);
    CHECK(verdict(Check::sequential_duplicate, of({answered(200), answered(200)}, 0)) ==
          Verdict::fail);
    // A first delivery refused says nothing about idempotency.
    auto refused = judge(Check::sequential_duplicate, of({answered(400), answered(400)}), {});
    CHECK(refused.verdict == Verdict::fail);
    CHECK(refused.reason.find("refused probe's delivery") != std::string::npos);
    CHECK(verdict(Check::sequential_duplicate, of({answered(200), answered(500, "x")})) ==
          Verdict::fail);
}

TEST_CASE("concurrent-duplicates: 2xx or 409 only, at least one 2xx, one side effect") {
    CHECK(verdict(Check::concurrent_duplicates,
                  of({answered(200), answered(409), answered(409), answered(200)}, 1)) ==
          Verdict::pass);
    CHECK(verdict(Check::concurrent_duplicates, of({answered(200), answered(500)}, 1)) ==
          Verdict::fail);
    CHECK(verdict(Check::concurrent_duplicates, of({answered(409), answered(409)}, 1)) ==
          Verdict::fail);
    CHECK(verdict(Check::concurrent_duplicates, of({answered(200), answered(200)}, 2)) ==
          Verdict::fail);
    CHECK(verdict(Check::concurrent_duplicates, of({answered(200), answered(429)}, 1)) ==
          Verdict::fail);
}

TEST_CASE("key-reuse: the other payload refused 4xx, the first one's effect only") {
    CHECK(verdict(Check::key_reuse, of({answered(200), answered(422)}, 1)) == Verdict::pass);
    // Another 4xx: providers tolerate it, the IETF draft asks 422 (a
    // warning, a failure under --expect draft).
    auto other_4xx = judge(Check::key_reuse, of({answered(200), answered(409)}, 1), {});
    CHECK(other_4xx.verdict == Verdict::warn);
    CHECK(other_4xx.reason.find("\"Error Scenarios\"") != std::string::npos);
    JudgeRules draft;
    draft.expect_draft = true;
    CHECK(judge(Check::key_reuse, of({answered(200), answered(409)}, 1), draft).verdict ==
          Verdict::fail);
    CHECK(judge(Check::key_reuse, of({answered(200), answered(422)}, 1), draft).verdict ==
          Verdict::pass);
    // A retry of a completed request answered with another status.
    CHECK(judge(Check::sequential_duplicate, of({answered(201), answered(200)}, 1), {}).verdict ==
          Verdict::warn);
    CHECK(
        judge(Check::sequential_duplicate, of({answered(201), answered(200)}, 1), draft).verdict ==
        Verdict::fail);
    CHECK(
        judge(Check::sequential_duplicate, of({answered(202), answered(200)}, 1), draft).verdict ==
        Verdict::pass);
    CHECK(verdict(Check::key_reuse, of({answered(200), answered(200)}, 1)) == Verdict::fail);
    CHECK(verdict(Check::key_reuse, of({answered(200), answered(422)}, 2)) == Verdict::fail);
}

TEST_CASE("retries: the last answer 2xx, one side effect; the fault must be a 5xx") {
    Answer dropped;
    dropped.label = "dropped";
    dropped.outcome = Answer::Outcome::hung_up;
    CHECK(verdict(Check::retry_after_drop, of({dropped, answered(409), answered(200)}, 1)) ==
          Verdict::pass);
    CHECK(verdict(Check::retry_after_drop, of({dropped, answered(200)}, 2)) == Verdict::fail);
    CHECK(verdict(Check::retry_after_5xx, of({answered(503), answered(200)}, 1)) == Verdict::pass);
    CHECK(verdict(Check::retry_after_5xx, of({answered(200), answered(200)}, 1)) == Verdict::fail);
    CHECK(verdict(Check::retry_after_5xx, of({answered(503), answered(503)}, 0)) == Verdict::fail);
    CHECK(verdict(Check::late_retry, of({answered(200), answered(200)}, 2)) == Verdict::fail);
}

TEST_CASE("regenerated-key warns when acted on twice, fails only when payload dedup is expected") {
    auto twice = of({answered(200), answered(200)}, 2);
    CHECK(verdict(Check::regenerated_key, twice) == Verdict::warn);
    CHECK(verdict(Check::regenerated_key, twice, {true, std::chrono::seconds(10), "/", "", {}}) ==
          Verdict::fail);
    CHECK(verdict(Check::regenerated_key, of({answered(200), answered(200)}, 1)) == Verdict::pass);
    CHECK(verdict(Check::regenerated_key, of({answered(200), answered(200)})) == Verdict::warn);
    CHECK(verdict(Check::regenerated_key, of({answered(200), answered(409)})) == Verdict::pass);
}

TEST_CASE("forgeries and stale replays must be refused 4xx with no side effect") {
    CHECK(verdict(Check::forged_signature, of({answered(401)}, 0)) == Verdict::pass);
    CHECK(verdict(Check::forged_signature, of({answered(200)}, 1)) == Verdict::fail);
    CHECK(verdict(Check::forged_signature, of({answered(400)}, 1)) == Verdict::fail);
    CHECK(verdict(Check::stale_replay, of({answered(500)})) == Verdict::fail);
}

TEST_CASE("out-of-order: early ones refused, or the final state the in-order one") {
    CHECK(verdict(Check::out_of_order, of({answered(200), answered(409), answered(425)})) ==
          Verdict::pass);
    auto accepted = of({answered(200), answered(200)});
    CHECK(verdict(Check::out_of_order, accepted) == Verdict::skipped);
    accepted.state_reversed = "shipped";
    accepted.state_in_order = "shipped";
    CHECK(verdict(Check::out_of_order, accepted) == Verdict::pass);
    accepted.state_reversed = "paid";
    CHECK(verdict(Check::out_of_order, accepted) == Verdict::fail);
}

TEST_CASE("no answer fails the check; slow-answer judges every answer against the deadline") {
    Answer lost;
    lost.label = "copy 2";
    lost.outcome = Answer::Outcome::no_answer;
    lost.error = "Timeout was reached";
    auto failed = judge(Check::sequential_duplicate, of({answered(200), lost}), {});
    CHECK(failed.verdict == Verdict::fail);
    CHECK(failed.reason.find("Timeout was reached") != std::string::npos);

    JudgeRules rules{false, std::chrono::seconds(10), "/", "", {}};
    std::vector<CheckResult> others{
        judge(Check::key_reuse, of({answered(200), answered(422)}), rules)};
    CHECK(judge_slow_answer(others, {of({answered(200), answered(422)})}, rules).verdict ==
          Verdict::pass);
    auto slow = judge_slow_answer(others, {of({answered(200), answered(422, "d", 12000)})}, rules);
    CHECK(slow.verdict == Verdict::fail);
    CHECK(slow.reason.find("key-reuse") != std::string::npos);
    CHECK(judge_slow_answer(others, {of({answered(200), lost})}, rules).verdict == Verdict::fail);
}

TEST_CASE("a check that could not run says why") {
    Observation observed;
    observed.skip_reason = "give --scheme";
    auto made = judge(Check::forged_signature, observed, {});
    CHECK(made.verdict == Verdict::skipped);
    CHECK(made.reason == "give --scheme");
}

TEST_CASE("check names parse back, and a typo gets a hint") {
    for (auto check : all_checks())
        CHECK(parse_check(check_name(check)) == check);
    CHECK_THROWS_WITH_AS((void)parse_check("key-resue"),
                         doctest::Contains("did you mean key-reuse"), UsageError);
}

TEST_CASE("schedules: the providers' and fixed ones; a typo is a usage error") {
    CHECK(parse_schedule("svix").intervals.front() == std::chrono::seconds(5));
    CHECK(parse_schedule("fixed:1s,2s,4s").intervals.size() == 3);
    CHECK_THROWS_AS((void)parse_schedule("stirpe"), UsageError);
    CHECK_THROWS_AS((void)parse_schedule("fixed:"), UsageError);
}

TEST_CASE("every report medium escapes what a handler or a template put in") {
    ProbeResult result;
    result.target = "http://127.0.0.1:1/";
    result.effects = "unobserved";
    auto hostile = of({answered(200), answered(200)});
    hostile.answers[0].label = "newest first (seq \x1b]0;owned\x07<script>|x</script>)";
    result.checks.push_back(judge(Check::sequential_duplicate, hostile, {}));
    result.checks.back().reason = "\x1b[31mred\x1b[0m <b>|</b> & \"quoted\"";
    auto table = render_report(result, ReportFormat::table, k_never_cut, "idem test");
    CHECK(table.find('\x1b') == std::string::npos);
    auto junit = render_report(result, ReportFormat::junit, k_never_cut, "idem test");
    CHECK(junit.find('\x1b') == std::string::npos);
    CHECK(junit.find("<script>") == std::string::npos);
    CHECK(junit.find("<b>") == std::string::npos);
    auto markdown = render_report(result, ReportFormat::markdown, k_never_cut, "idem test");
    CHECK(markdown.find("<b>") == std::string::npos);
    CHECK(markdown.find("\\|") != std::string::npos);
    auto json = render_report(result, ReportFormat::json, k_never_cut, "idem test");
    CHECK(json.find('\x1b') == std::string::npos);
    CHECK(json.find('\x07') == std::string::npos);
}

} // namespace idem::probe
