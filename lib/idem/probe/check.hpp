#pragma once
// idem probe's checks (docs/probe.md): their names, what each observed and
// the verdict it gives. Pure: the run (probe/run.hpp) sends and observes,
// these judge, so every rule is unit-testable without a handler.

#include "idem/util/time.hpp"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::probe {

enum class Check {
    sequential_duplicate,
    concurrent_duplicates,
    key_reuse,
    other_endpoint,
    retry_after_drop,
    retry_after_5xx,
    late_retry,
    retry_after_restart,
    regenerated_key,
    forged_signature,
    stale_replay,
    out_of_order,
    slow_answer,
};

// Every check, in the order a run makes them (slow-answer last: it judges
// the answers of all the others).
[[nodiscard]] const std::vector<Check>& all_checks();
// "sequential-duplicate": the names in reports, --checks and the docs.
[[nodiscard]] std::string_view check_name(Check check);
// Throws UsageError with a "did you mean" for a name that is none.
[[nodiscard]] Check parse_check(std::string_view name);

enum class Verdict { pass, fail, warn, skipped };
[[nodiscard]] std::string_view verdict_name(Verdict verdict);

// One request probe made and what came of it.
struct Answer {
    std::string label; // "copy 1", "retry 2", "forged"
    std::string key;
    enum class Outcome {
        answered,
        unreachable, // no connection was made
        no_answer,   // sent, then the connection failed or the time ran out
        hung_up,     // probe closed the connection before reading (retry-after-drop)
    } outcome = Outcome::answered;
    int status = 0;
    std::string digest; // SHA-256 of the answer's body, hex
    // What a developer reads of the answer: its first k_answer_excerpt
    // bytes (cut on a character) and its Retry-After, shown for a failing
    // check (docs/probe.md, "Evidence").
    std::string body_start;
    std::string retry_after;
    std::vector<std::pair<std::string, std::string>> key_headers; // TransferResult's
    Duration latency{0};
    std::string error; // why there was no answer
    Timestamp sent_at;

    [[nodiscard]] bool answered() const { return outcome == Outcome::answered; }
    [[nodiscard]] bool success() const { return answered() && status >= 200 && status < 300; }
    [[nodiscard]] bool refused() const { return answered() && status >= 400 && status < 500; }
    [[nodiscard]] bool server_error() const { return answered() && status >= 500; }
};

inline constexpr std::size_t k_answer_excerpt = 200;

// What one check observed: its answers, and the side effects its
// deliveries left when an observer was given (nullopt: unobserved).
struct Observation {
    std::vector<Answer> answers;
    std::optional<std::int64_t> effects;
    // out-of-order: the observer's reading after the reversed delivery and
    // after the same events in order.
    std::optional<std::string> state_reversed, state_in_order;
    std::string skip_reason; // non-empty: the check did not run, this is why
    // Set when a side-effect reading grew this long after the check's
    // answer, past --settle: the handler acts after it answers.
    std::optional<Duration> acted_after_answer;
    // retry-after-restart: why the restart did not happen (its command
    // failed, the handler never came back); empty when it did.
    std::string restart_problem;
};

struct CheckResult {
    Check check = Check::sequential_duplicate;
    Verdict verdict = Verdict::skipped;
    std::string reason;      // one line: why this verdict
    nlohmann::json evidence; // requests, statuses, digests, effects, timings
    Duration elapsed{0};
};

// The rules each check's verdict follows (docs/probe.md, "Checks").
struct JudgeRules {
    bool expect_payload_dedup = false; // regenerated-key fails instead of warning
    Duration deadline = std::chrono::seconds(10);
    // other-endpoint: the --to URL's path and the --also-to path, as named.
    std::string to_path, also_to;
    // --vary: the fields every copy carries anew ("attempt"), as named.
    std::vector<std::string> varied;
    // --expect draft: what the IETF Idempotency-Key draft asks and providers
    // tolerate otherwise (a retry answered with another body, key reuse
    // refused with another 4xx than 422) fails instead of warning.
    bool expect_draft = false;
};

// The verdict of `check` on what it observed. slow-answer is judged from
// every other check's answers (judge_slow_answer).
[[nodiscard]] CheckResult judge(Check check, const Observation& observed, const JudgeRules& rules);
[[nodiscard]] CheckResult judge_slow_answer(const std::vector<CheckResult>& others,
                                            const std::vector<Observation>& observed,
                                            const JudgeRules& rules);

} // namespace idem::probe
