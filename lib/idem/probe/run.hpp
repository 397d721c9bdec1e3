#pragma once
// idem probe (docs/probe.md): sends a planned set of deliveries to a
// handler the user runs, observes the answers and, when told how, the side
// effects, and judges each check (probe/check.hpp). Sends only to the --to
// URL as given: no URL is built from template data, redirects are not
// followed, every answer's body is bounded and every request timed out.

#include "idem/io/diagnostics.hpp"
#include "idem/probe/check.hpp"
#include "idem/probe/effects.hpp"
#include "idem/record/field_path.hpp"
#include "idem/run/input.hpp"
#include "idem/verify/config.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace idem::probe {

// A provider's retry intervals (--schedule), for retry-after-5xx.
struct Schedule {
    std::string name;
    std::vector<Duration> intervals;
};
// stripe, svix, github, slack, or fixed:1s,2s,4s. Throws UsageError.
[[nodiscard]] Schedule parse_schedule(std::string_view text);

// --vary PATH=attempt|now|uuid: a field a provider changes on every copy
// of a delivery (an attempt counter, the time it was sent, a delivery id).
struct VariedField {
    enum class Kind { attempt, now, uuid };
    record::FieldPath path;
    Kind kind = Kind::attempt;
};
// "data.attempt=attempt". Throws UsageError.
[[nodiscard]] VariedField parse_varied_field(std::string_view text);

struct ProbeOptions {
    std::string to;
    // --template: NDJSON events or envelopes (replay's records); no paths:
    // a small built-in event.
    run::InputOptions templates;
    bool has_templates = false;
    std::optional<record::FieldPath> key_path; // --key: the key is the event's own
    std::string key_header = "Idempotency-Key";
    std::optional<verify::VerifyConfig> signing; // --scheme and its keys
    std::size_t copies = 8;
    std::optional<std::pair<std::string, std::string>> fail_first; // the fault header
    Schedule schedule;
    double speed = 60;
    Duration late = std::chrono::minutes(6);
    bool late_given = false;
    std::string clock_header; // the handler reads its clock from it
    bool expect_payload_dedup = false;
    bool expect_draft = false; // --expect draft (JudgeRules::expect_draft)
    std::optional<record::FieldPath> order_path;
    // Set on every request as its kind says, so that no two copies of a
    // delivery are the same bytes (a handler that tells copies apart by a
    // hash of the body acts on each).
    std::vector<VariedField> vary;
    // --restart-cmd: run by /bin/sh between a delivery and its retry
    // (retry-after-restart), its output discarded; then the handler is
    // asked until it answers, for up to restart_timeout.
    std::string restart_cmd;
    Duration restart_timeout = std::chrono::seconds(30);
    // --also-to PATH: other-endpoint sends the same key there, on --to's
    // own origin (never another host).
    std::string also_to;
    Duration deadline = std::chrono::seconds(10);
    Duration settle{0};        // after a check's deliveries, before its effects are read
    std::vector<Check> checks; // empty: every check
    std::unique_ptr<EffectObserver> effects;
    std::string ledger_path;
    // How probe waits (a real sleep); tests give one that only counts.
    std::function<void(Duration)> pause;
};

struct ProbeResult {
    std::string target;
    std::string effects; // the observer's kind, or "unobserved"
    std::vector<CheckResult> checks;
    std::uint64_t requests = 0;

    [[nodiscard]] std::size_t count(Verdict verdict) const;
};

// Throws UsageError (options, templates), NetworkError when the target
// cannot be reached at all (exit 4), StoreError when side effects cannot
// be read.
[[nodiscard]] ProbeResult run_probe(ProbeOptions& options, io::Diagnostics& diagnostics);

} // namespace idem::probe
