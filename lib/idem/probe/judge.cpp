#include "idem/probe/check.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

namespace idem::probe {

namespace {

struct Named {
    Check check;
    std::string_view name;
};

constexpr std::array<Named, 13> k_names{{
    {Check::sequential_duplicate, "sequential-duplicate"},
    {Check::concurrent_duplicates, "concurrent-duplicates"},
    {Check::key_reuse, "key-reuse"},
    {Check::other_endpoint, "other-endpoint"},
    {Check::retry_after_drop, "retry-after-drop"},
    {Check::retry_after_5xx, "retry-after-5xx"},
    {Check::late_retry, "late-retry"},
    {Check::retry_after_restart, "retry-after-restart"},
    {Check::regenerated_key, "regenerated-key"},
    {Check::forged_signature, "forged-signature"},
    {Check::stale_replay, "stale-replay"},
    {Check::out_of_order, "out-of-order"},
    {Check::slow_answer, "slow-answer"},
}};

double milliseconds_of(Duration duration) {
    return std::chrono::duration<double, std::milli>(duration).count();
}

std::string outcome_text(const Answer& answer) {
    switch (answer.outcome) {
    case Answer::Outcome::answered:
        return std::to_string(answer.status);
    case Answer::Outcome::unreachable:
        return "unreachable";
    case Answer::Outcome::no_answer:
        return "no answer";
    case Answer::Outcome::hung_up:
        return "hung up";
    }
    return "?";
}

nlohmann::json evidence_of(const Observation& observed) {
    nlohmann::json evidence;
    auto requests = nlohmann::json::array();
    for (const auto& answer : observed.answers) {
        nlohmann::json request{{"request", answer.label}, {"key", answer.key}};
        if (answer.answered()) {
            request["status"] = answer.status;
            request["body_sha256"] = answer.digest;
            if (!answer.body_start.empty()) request["body_start"] = answer.body_start;
            if (!answer.retry_after.empty()) request["retry_after"] = answer.retry_after;
            for (const auto& [name, value] : answer.key_headers)
                request["headers"][name] = value;
        } else {
            request["outcome"] = outcome_text(answer);
            if (!answer.error.empty()) request["error"] = answer.error;
        }
        request["latency_ms"] = std::round(milliseconds_of(answer.latency) * 1000) / 1000;
        request["sent_at"] = format_rfc3339(answer.sent_at);
        requests.push_back(std::move(request));
    }
    evidence["requests"] = std::move(requests);
    if (observed.effects)
        evidence["effects"] = *observed.effects;
    else
        evidence["effects"] = "unobserved";
    if (observed.state_reversed) evidence["state_reversed"] = *observed.state_reversed;
    if (observed.state_in_order) evidence["state_in_order"] = *observed.state_in_order;
    return evidence;
}

// "200, 200" : the statuses as a person reads them.
std::string statuses(const std::vector<Answer>& answers) {
    std::string text;
    for (const auto& answer : answers) {
        if (!text.empty()) text += ", ";
        text += outcome_text(answer);
    }
    return text;
}

// The answer a failing reason is about: the one whose label it names (the
// longest such, "copy 10" over "copy 1"), else the last one answered.
const Answer* answer_named(const Observation& observed, std::string_view reason) {
    const Answer* named = nullptr;
    for (const auto& answer : observed.answers)
        if (answer.answered() && !answer.label.empty() &&
            reason.find(answer.label) != std::string_view::npos &&
            (!named || answer.label.size() > named->label.size()))
            named = &answer;
    if (named) return named;
    auto last = std::find_if(observed.answers.rbegin(), observed.answers.rend(),
                             [](const Answer& answer) { return answer.answered(); });
    return last == observed.answers.rend() ? nullptr : &*last;
}

// "copy 2: 422, Retry-After 5, {"error":"..."}": what a developer reads
// first when a check fails (result() puts it after the reason, as "[the
// handler answered ...]"). Rendered escaped by every report.
std::string answer_shown(const Answer& answer) {
    std::string shown = fmt::format("{}: {}", answer.label, answer.status);
    if (!answer.retry_after.empty()) shown += ", Retry-After " + answer.retry_after;
    for (const auto& [name, value] : answer.key_headers)
        if (name != "Content-Type") shown += fmt::format(", {} {}", name, value);
    constexpr std::size_t k_in_reason = 120;
    if (answer.body_start.empty())
        shown += ", an empty body";
    else
        shown += ", " + utf8_prefix(answer.body_start, k_in_reason) +
                 (answer.body_start.size() > k_in_reason ? "..." : "");
    return shown;
}

CheckResult result(Check check, Verdict verdict, std::string reason, const Observation& observed) {
    if (observed.acted_after_answer) {
        auto lag = *observed.acted_after_answer;
        reason += fmt::format(
            " (the handler acts after it answers: a side-effect reading grew {:.1f} s after "
            "the answer, which probe waited for; --settle {} or more says so)",
            milliseconds_of(lag) / 1000,
            format_duration(round_up_to_written_duration(lag * 3 / 2)));
    }
    if (verdict == Verdict::fail)
        if (const auto* answer = answer_named(observed, reason))
            reason += " [the handler answered " + answer_shown(*answer) + "]";
    return {check, verdict, std::move(reason), evidence_of(observed), Duration{0}};
}

// A request that got no answer fails the check that sent it: what the
// handler did with it cannot be told.
std::optional<std::string> transport_problem(const Observation& observed) {
    for (const auto& answer : observed.answers)
        if (answer.outcome == Answer::Outcome::unreachable ||
            answer.outcome == Answer::Outcome::no_answer)
            return fmt::format("{}: {}{}", answer.label, outcome_text(answer),
                               answer.error.empty() ? "" : " (" + answer.error + ")");
    return std::nullopt;
}

std::optional<std::string> server_error(const Observation& observed) {
    for (const auto& answer : observed.answers)
        if (answer.server_error())
            return fmt::format("{} was answered {}: a provider retries a 5xx", answer.label,
                               answer.status);
    return std::nullopt;
}

// The first delivery must be one the handler accepts, or nothing after it
// says anything about idempotency.
std::optional<std::string> first_refused(const Answer& first) {
    if (first.success()) return std::nullopt;
    return fmt::format("the first delivery was answered {}, not 2xx: the handler refused probe's "
                       "delivery (does it need a signature, --scheme and --secret, or another "
                       "--template?)",
                       outcome_text(first));
}

// Exactly one side effect, when they are observed; the reason otherwise.
std::optional<std::string> effects_problem(const Observation& observed, std::int64_t expected,
                                           std::string_view what) {
    if (!observed.effects || *observed.effects == expected) return std::nullopt;
    if (*observed.effects == 0 && expected > 0)
        return fmt::format("no side effect was observed for {} (is the effects query right?)",
                           what);
    return fmt::format("{} side effects for {}, {} expected", *observed.effects, what, expected);
}

std::string unobserved_note(const Observation& observed) {
    return observed.effects ? std::string() : " (effects unobserved: statuses only)";
}

// A copy that differs only in --vary fields refused as another payload.
std::optional<std::string> varied_copy_refused(const Answer& answer, const JudgeRules& rules) {
    if (rules.varied.empty() || answer.status != 422) return std::nullopt;
    return fmt::format("{}, which differs from the first only in the fields a provider sets "
                       "anew on every copy ({}), was refused 422 as another payload: the "
                       "handler takes a provider's retry for a reused key (leave those fields "
                       "out of what it compares)",
                       answer.label, fmt::join(rules.varied, ", "));
}

// The failing result of a check whose request got no answer, or whose
// first delivery the handler refused; nullopt when neither.
std::optional<CheckResult> unanswered_or_refused(Check check, const Observation& observed) {
    if (auto problem = transport_problem(observed))
        return result(check, Verdict::fail, *problem, observed);
    if (auto refused = first_refused(observed.answers.at(0)))
        return result(check, Verdict::fail, *refused, observed);
    return std::nullopt;
}

CheckResult judge_sequential(const Observation& observed, const JudgeRules& rules) {
    const auto check = Check::sequential_duplicate;
    if (auto problem = transport_problem(observed))
        return result(check, Verdict::fail, *problem, observed);
    const auto& first = observed.answers.at(0);
    const auto& second = observed.answers.back(); // after any 409s (in progress)
    if (auto refused = first_refused(first))
        return result(check, Verdict::fail, *refused, observed);
    bool replayed = second.status == first.status && second.digest == first.digest;
    if (auto refused = varied_copy_refused(second, rules))
        return result(check, Verdict::fail, *refused, observed);
    if (!second.success() && !replayed)
        return result(check, Verdict::fail,
                      fmt::format("the duplicate was answered {} after {}: a provider retries "
                                  "what is not 2xx",
                                  second.status, first.status),
                      observed);
    if (auto problem = effects_problem(observed, 1, "two identical deliveries"))
        return result(check, Verdict::fail, *problem, observed);
    // A 202 (accepted, acted on later) is answered with the result once
    // the work is done: that is the completed request's response.
    if (!replayed && second.success() && first.success() && first.status != 202)
        return result(
            check, rules.expect_draft ? Verdict::fail : Verdict::warn,
            fmt::format("the retry was answered {} after {}{}: the IETF Idempotency-Key draft "
                        "(\"Idempotency Enforcement Scenarios\") answers a retry of a completed "
                        "request with its first response{}",
                        second.status, first.status,
                        second.status == first.status ? ", with another body" : "",
                        rules.expect_draft ? "" : " (--expect draft makes this a failure)"),
            observed);
    return result(check, Verdict::pass,
                  fmt::format("answered {}{}", statuses(observed.answers),
                              replayed ? ", the same body (a replayed response)" : "") +
                      (observed.effects ? ", one side effect" : unobserved_note(observed)),
                  observed);
}

CheckResult judge_concurrent(const Observation& observed) {
    const auto check = Check::concurrent_duplicates;
    if (auto problem = transport_problem(observed))
        return result(check, Verdict::fail, *problem, observed);
    if (auto problem = server_error(observed))
        return result(check, Verdict::fail, *problem, observed);
    std::size_t succeeded = 0, in_progress = 0;
    for (const auto& answer : observed.answers) {
        if (answer.success())
            ++succeeded;
        else if (answer.status == 409)
            ++in_progress;
        else
            return result(check, Verdict::fail,
                          fmt::format("{} was answered {}: expected 2xx, or 409 while the first "
                                      "copy is in progress",
                                      answer.label, answer.status),
                          observed);
    }
    if (succeeded == 0)
        return result(check, Verdict::fail, "no copy was answered 2xx: every one was 409",
                      observed);
    if (auto problem = effects_problem(
            observed, 1, fmt::format("{} identical concurrent copies", observed.answers.size())))
        return result(check, Verdict::fail, *problem, observed);
    return result(check, Verdict::pass,
                  fmt::format("{} copies: {} answered 2xx, {} 409{}", observed.answers.size(),
                              succeeded, in_progress,
                              observed.effects ? ", one side effect" : unobserved_note(observed)),
                  observed);
}

CheckResult judge_key_reuse(const Observation& observed, const JudgeRules& rules) {
    const auto check = Check::key_reuse;
    if (auto failed = unanswered_or_refused(check, observed)) return *failed;
    const auto& second = observed.answers.at(1);
    if (second.success()) {
        if (observed.effects && *observed.effects > 1)
            return result(check, Verdict::fail,
                          fmt::format("the same key with another payload was answered {} and "
                                      "acted on: {} side effects under one key (the handler "
                                      "tells deliveries apart by their payload, not their key; "
                                      "another payload should be refused: 422, the IETF "
                                      "Idempotency-Key draft)",
                                      second.status, *observed.effects),
                          observed);
        return result(check, Verdict::fail,
                      fmt::format("the same key with another payload was answered {}: it should "
                                  "be refused (422, the IETF Idempotency-Key draft){}",
                                  second.status,
                                  observed.effects ? fmt::format("; {} side effect{} observed",
                                                                 *observed.effects,
                                                                 *observed.effects == 1 ? "" : "s")
                                                   : std::string()),
                      observed);
    }
    if (!second.refused())
        return result(check, Verdict::fail,
                      fmt::format("the same key with another payload was answered {}, not 4xx",
                                  second.status),
                      observed);
    if (auto problem = effects_problem(observed, 1, "the key"))
        return result(check, Verdict::fail, *problem, observed);
    if (second.status != 422)
        return result(
            check, rules.expect_draft ? Verdict::fail : Verdict::warn,
            fmt::format("the other payload was refused {}, not 422: the IETF "
                        "Idempotency-Key draft (\"Error Scenarios\") answers a key "
                        "reused with another payload 422{}{}",
                        second.status,
                        observed.effects ? "; the first payload's side effect only" : "",
                        rules.expect_draft ? "" : " (--expect draft makes this a failure)"),
            observed);
    return result(check, Verdict::pass,
                  fmt::format("the other payload was refused {}{}", second.status,
                              second.status == 422 ? "" : " (the IETF draft says 422)") +
                      (observed.effects ? ", the first payload's side effect only"
                                        : unobserved_note(observed)),
                  observed);
}

// retry-after-drop, retry-after-5xx and late-retry: the delivery that
// finally counts is the last answer; one side effect in all.
CheckResult judge_retried(Check check, const Observation& observed, std::string_view what,
                          const JudgeRules& rules) {
    const auto& last = observed.answers.back();
    for (std::size_t i = 0; i + 1 < observed.answers.size(); ++i) {
        const auto& answer = observed.answers[i];
        if (answer.outcome == Answer::Outcome::unreachable ||
            answer.outcome == Answer::Outcome::no_answer)
            return result(check, Verdict::fail,
                          fmt::format("{}: {}", answer.label, outcome_text(answer)), observed);
    }
    if (!last.answered())
        return result(check, Verdict::fail,
                      fmt::format("{}: {}{}", last.label, outcome_text(last),
                                  last.error.empty() ? "" : " (" + last.error + ")"),
                      observed);
    if (auto refused = varied_copy_refused(last, rules))
        return result(check, Verdict::fail, *refused, observed);
    if (!last.success()) {
        // A 409 to a retry of a delivery that completed: the handler holds
        // the key as in progress forever, or never stored the response.
        bool completed_before = std::any_of(observed.answers.begin(), observed.answers.end() - 1,
                                            [](const Answer& answer) { return answer.success(); });
        if (last.status == 409 && (completed_before || (observed.effects && *observed.effects > 0)))
            return result(check, Verdict::fail,
                          fmt::format("{} was answered 409 (in progress) after the first "
                                      "delivery had completed ({}{}): a completed key is "
                                      "answered with its first response, and the provider "
                                      "would go on retrying a 409",
                                      last.label, statuses(observed.answers),
                                      observed.effects ? fmt::format(", {} side effect observed",
                                                                     *observed.effects)
                                                       : std::string()),
                          observed);
        return result(check, Verdict::fail,
                      fmt::format("{} was answered {}, not 2xx: the provider would go on "
                                  "retrying",
                                  last.label, last.status),
                      observed);
    }
    if (auto problem = effects_problem(observed, 1, what))
        return result(check, Verdict::fail, *problem, observed);
    return result(check, Verdict::pass,
                  fmt::format("answered {}{}", statuses(observed.answers),
                              observed.effects ? ", one side effect" : unobserved_note(observed)),
                  observed);
}

CheckResult judge_retry_after_5xx(const Observation& observed, const JudgeRules& rules) {
    const auto check = Check::retry_after_5xx;
    const auto& first = observed.answers.at(0);
    if (first.answered() && !first.server_error())
        return result(check, Verdict::fail,
                      fmt::format("the copy with the fault header was answered {}, not 5xx: the "
                                  "handler did not inject the fault --fail-first names",
                                  first.status),
                      observed);
    return judge_retried(check, observed, "a failed delivery and its retries", rules);
}

CheckResult judge_regenerated(const Observation& observed, const JudgeRules& rules) {
    const auto check = Check::regenerated_key;
    if (auto failed = unanswered_or_refused(check, observed)) return *failed;
    const auto& first = observed.answers.at(0);
    const auto& second = observed.answers.at(1);
    auto acted_twice = rules.expect_payload_dedup ? Verdict::fail : Verdict::warn;
    if (observed.effects) {
        if (*observed.effects == 0)
            return result(check, Verdict::fail,
                          fmt::format("the first delivery was answered {} and the same payload "
                                      "under a new key {}, yet no side effect was observed for "
                                      "either (is the effects query right?)",
                                      outcome_text(first), outcome_text(second)),
                          observed);
        if (*observed.effects == 1)
            return result(check, Verdict::pass,
                          fmt::format("the same payload under a new key was answered {}; 1 side "
                                      "effect observed for both keys",
                                      outcome_text(second)),
                          observed);
        return result(check, acted_twice,
                      fmt::format("the same payload under a new key was acted on {} times: a "
                                  "workflow that regenerates its key pays twice{}",
                                  *observed.effects,
                                  rules.expect_payload_dedup ? ""
                                                             : " (--expect-payload-dedup "
                                                               "makes this a failure)"),
                      observed);
    }
    if (!second.success())
        return result(
            check, Verdict::pass,
            fmt::format("the same payload under a new key was refused {}", outcome_text(second)),
            observed);
    return result(check, acted_twice,
                  fmt::format("the same payload under a new key was answered {}: whether it "
                              "acted twice needs --effects-*",
                              second.status),
                  observed);
}

// other-endpoint: one delivery to --to, the same to --also-to PATH of the
// same origin. One side effect: the key, not the endpoint, makes a
// delivery the same.
CheckResult judge_other_endpoint(const Observation& observed, const JudgeRules& rules) {
    const auto check = Check::other_endpoint;
    if (auto failed = unanswered_or_refused(check, observed)) return *failed;
    const auto& first = observed.answers.at(0);
    const auto& second = observed.answers.at(1);
    if (auto problem = server_error(observed))
        return result(check, Verdict::fail, *problem, observed);
    if (observed.effects) {
        if (*observed.effects > 1)
            return result(check, Verdict::fail,
                          fmt::format("the same delivery under the same key, sent to {}, was "
                                      "answered {} and acted on again: {} side effects (the "
                                      "handler keys its deliveries by endpoint and key, not by "
                                      "key)",
                                      rules.also_to, second.status, *observed.effects),
                          observed);
        if (auto problem = effects_problem(observed, 1, "one key at two endpoints"))
            return result(check, Verdict::fail, *problem, observed);
        return result(check, Verdict::pass,
                      fmt::format("answered {} at {} and {} at {}; 1 side effect observed",
                                  first.status, rules.to_path, second.status, rules.also_to),
                      observed);
    }
    if (!second.success())
        return result(
            check, Verdict::pass,
            fmt::format("the same key at {} was answered {}", rules.also_to, second.status),
            observed);
    return result(check, Verdict::warn,
                  fmt::format("the same key at {} was answered {}: whether it acted twice needs "
                              "--effects-*",
                              rules.also_to, second.status),
                  observed);
}

CheckResult judge_refused_delivery(Check check, const Observation& observed,
                                   std::string_view what) {
    if (auto problem = transport_problem(observed))
        return result(check, Verdict::fail, *problem, observed);
    const auto& answer = observed.answers.at(0);
    if (!answer.refused())
        return result(check, Verdict::fail,
                      fmt::format("{} was answered {}, not 4xx", what, outcome_text(answer)),
                      observed);
    if (auto problem = effects_problem(observed, 0, what))
        return result(check, Verdict::fail, *problem, observed);
    return result(check, Verdict::pass,
                  fmt::format("{} was refused {}{}", what, answer.status,
                              observed.effects ? ", no side effect" : unobserved_note(observed)),
                  observed);
}

CheckResult judge_out_of_order(const Observation& observed) {
    const auto check = Check::out_of_order;
    if (auto problem = transport_problem(observed))
        return result(check, Verdict::fail, *problem, observed);
    if (auto problem = server_error(observed))
        return result(check, Verdict::fail, *problem, observed);
    // Newest first: every later one is older than one already delivered.
    bool all_refused =
        observed.answers.size() > 1 &&
        std::all_of(observed.answers.begin() + 1, observed.answers.end(),
                    [](const Answer& a) { return a.status == 409 || a.status == 425; });
    if (all_refused)
        return result(check, Verdict::pass,
                      "every event older than one delivered before it was answered 409 or 425",
                      observed);
    if (observed.state_reversed && observed.state_in_order) {
        if (*observed.state_reversed == *observed.state_in_order)
            return result(check, Verdict::pass,
                          fmt::format("the state after newest-first delivery ({}) is the "
                                      "in-order one",
                                      *observed.state_reversed),
                          observed);
        return result(check, Verdict::fail,
                      fmt::format("newest-first delivery left {}, in-order delivery {}: an "
                                  "older event overwrote a newer one",
                                  *observed.state_reversed, *observed.state_in_order),
                      observed);
    }
    return result(check, Verdict::skipped,
                  "the older events were accepted (2xx): whether the final state is right needs "
                  "--effects-* reading it",
                  observed);
}

} // namespace

const std::vector<Check>& all_checks() {
    static const std::vector<Check> checks = [] {
        std::vector<Check> made;
        for (const auto& named : k_names)
            made.push_back(named.check);
        return made;
    }();
    return checks;
}

std::string_view check_name(Check check) {
    for (const auto& named : k_names)
        if (named.check == check) return named.name;
    return "?";
}

Check parse_check(std::string_view name) {
    std::vector<std::string> names;
    for (const auto& named : k_names) {
        if (named.name == name) return named.check;
        names.emplace_back(named.name);
    }
    auto hint = closest_name(name, names);
    throw UsageError(fmt::format("--checks: {} is not a check{}", quote(name),
                                 hint.empty() ? fmt::format(" (one of {})", fmt::join(names, ", "))
                                              : fmt::format("; did you mean {}?", hint)));
}

std::string_view verdict_name(Verdict verdict) {
    switch (verdict) {
    case Verdict::pass:
        return "pass";
    case Verdict::fail:
        return "fail";
    case Verdict::warn:
        return "warn";
    case Verdict::skipped:
        return "skipped";
    }
    return "?";
}

CheckResult judge(Check check, const Observation& observed, const JudgeRules& rules) {
    if (!observed.skip_reason.empty())
        return result(check, Verdict::skipped, observed.skip_reason, observed);
    switch (check) {
    case Check::sequential_duplicate:
        return judge_sequential(observed, rules);
    case Check::concurrent_duplicates:
        return judge_concurrent(observed);
    case Check::key_reuse:
        return judge_key_reuse(observed, rules);
    case Check::other_endpoint:
        return judge_other_endpoint(observed, rules);
    case Check::retry_after_drop:
        return judge_retried(check, observed, "a dropped delivery and its retry", rules);
    case Check::retry_after_5xx:
        return judge_retry_after_5xx(observed, rules);
    case Check::late_retry:
        return judge_retried(check, observed, "a delivery and its late retry", rules);
    case Check::retry_after_restart:
        if (!observed.restart_problem.empty())
            return result(check, Verdict::fail, observed.restart_problem, observed);
        return judge_retried(check, observed, "a delivery and its retry after a restart", rules);
    case Check::regenerated_key:
        return judge_regenerated(observed, rules);
    case Check::forged_signature:
        return judge_refused_delivery(check, observed, "a delivery with a forged signature");
    case Check::stale_replay:
        return judge_refused_delivery(check, observed,
                                      "a genuine delivery signed outside the tolerance");
    case Check::out_of_order:
        return judge_out_of_order(observed);
    case Check::slow_answer:
        break;
    }
    throw std::logic_error("judge: slow-answer is judged from the other checks");
}

CheckResult judge_slow_answer(const std::vector<CheckResult>& others,
                              const std::vector<Observation>& observed, const JudgeRules& rules) {
    Observation slowest;
    std::string slowest_check;
    std::size_t answers = 0, late = 0;
    for (std::size_t i = 0; i < observed.size(); ++i)
        for (const auto& answer : observed[i].answers) {
            if (answer.outcome == Answer::Outcome::hung_up ||
                answer.outcome == Answer::Outcome::unreachable)
                continue;
            ++answers;
            bool timed_out = answer.outcome == Answer::Outcome::no_answer;
            if (timed_out || answer.latency > rules.deadline) ++late;
            if (slowest.answers.empty() || timed_out ||
                answer.latency > slowest.answers.front().latency) {
                if (!slowest.answers.empty() &&
                    slowest.answers.front().outcome == Answer::Outcome::no_answer && !timed_out)
                    continue;
                slowest.answers = {answer};
                slowest_check = std::string(check_name(others.at(i).check));
            }
        }
    slowest.effects = std::nullopt;
    CheckResult made;
    if (answers == 0) {
        made = result(Check::slow_answer, Verdict::skipped, "no check got an answer", slowest);
    } else if (late > 0) {
        const auto& worst = slowest.answers.front();
        made = result(
            Check::slow_answer, Verdict::fail,
            fmt::format("{} of {} answers came after the {} deadline; the slowest, "
                        "{}'s {}, {}: a provider retries what answers late",
                        late, answers, format_duration(rules.deadline), slowest_check, worst.label,
                        worst.answered()
                            ? fmt::format("took {:.0f} ms", milliseconds_of(worst.latency))
                            : std::string("got no answer")),
            slowest);
    } else {
        made = result(Check::slow_answer, Verdict::pass,
                      fmt::format("all {} answers within {}; the slowest {:.0f} ms", answers,
                                  format_duration(rules.deadline),
                                  milliseconds_of(slowest.answers.front().latency)),
                      slowest);
    }
    made.evidence.erase("effects");
    return made;
}

} // namespace idem::probe
