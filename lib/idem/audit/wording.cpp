// The words audit's reports share: durations, positions, causes as sentences.

#include "idem/audit/detail/wording.hpp"

#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <set>

namespace idem::audit::detail {

double seconds(Duration duration) {
    return std::chrono::duration<double>(duration).count();
}

// "6m00s", "1.5s", "14h02m": short, for tables and sentences.
std::string short_duration(Duration duration) {
    auto total = seconds(duration);
    if (total < 60)
        return total == static_cast<double>(static_cast<long long>(total))
                   ? fmt::format("{}s", static_cast<long long>(total))
                   : fmt::format("{:.3g}s", total);
    auto whole = static_cast<long long>(total);
    if (whole < 3600)
        return whole % 60 == 0 ? fmt::format("{}m", whole / 60)
                               : fmt::format("{}m{:02}s", whole / 60, whole % 60);
    return whole % 3600 == 0 ? fmt::format("{}h", whole / 3600)
                             : fmt::format("{}h{:02}m", whole / 3600, whole % 3600 / 60);
}

// "dir/events.ndjson:12" -> "events.ndjson:12": the table is 80 columns.
std::vector<std::string> position_names(const Findings& findings,
                                        const std::vector<std::string>& positions) {
    std::vector<std::string> parts;
    for (const auto& position : positions) {
        if (findings.inputs.size() > 1) {
            parts.push_back(position);
            continue;
        }
        auto place = position.substr(position.rfind(':') + 1); // "12", or a query's "row 3"
        parts.push_back(place.starts_with("row ") ? place : "line " + place);
    }
    return parts;
}
std::string positions_text(const Findings& findings, const std::vector<std::string>& positions) {
    return fmt::format("{}", fmt::join(position_names(findings, positions), ", "));
}

std::string gap_list(const std::vector<Duration>& gaps, std::size_t limit) {
    std::string text;
    for (std::size_t i = 0; i < gaps.size() && i < limit; ++i)
        text += (i ? " " : "") + short_duration(gaps[i]);
    if (gaps.size() > limit) text += " ...";
    return text;
}

// A key or fingerprint for a person: a lone string without its quotes.
std::string plain(const std::string& json) {
    if (json.size() >= 2 && json.front() == '"' && json.back() == '"' &&
        json.find('\\') == std::string::npos)
        return json.substr(1, json.size() - 2);
    return json;
}

std::string group_label(const Findings& findings, const Explanation& group) {
    const auto& first = findings.attempts[group.records.front()];
    if (group.kind == GroupKind::key) return "key " + plain(findings.key(first.key));
    return "intent " + plain(findings.fingerprint(first.fingerprint));
}

// replayed-delivery, tampered, re-serialized: the first copy judged, what
// it carries and from which copy, and what that means.
std::string describe_signed_copies(const Findings& findings, const Explanation& group,
                                   const Evidence& evidence) {
    auto at = [&](std::size_t index) { return findings.position(group.records[index]); };
    const auto& copy = findings.attempts[group.records[evidence.records.front()]];
    auto original = evidence.originals.empty() ? k_no_original : evidence.originals.front();
    auto names = position_names(
        findings, {at(evidence.records.front()),
                   at(original == k_no_original ? evidence.records.front() : original)});
    const auto& copy_at = names[0];
    const auto& original_at = names[1];
    auto more = evidence.records.size() > 1
                    ? fmt::format(" (+{} more)", evidence.records.size() - 1)
                    : std::string();
    auto later = evidence.gaps.empty()
                     ? std::string()
                     : fmt::format(" {} later", short_duration(evidence.gaps.front()));
    const auto* verdict = findings.verdict_of(group.records[evidence.records.front()]);
    auto provider = provider_name(copy.trace.provider);
    switch (evidence.cause) {
    case Cause::replayed_delivery:
        if (original == k_no_original)
            return fmt::format("{}{}: verify says {}: an earlier delivery sent again, not a retry "
                               "(who sent it, the capture does not say)",
                               copy_at, more, verdict ? verdict->reason : "it is stale");
        return fmt::format("{} carries {}'s signed time{}{}: {} signs every attempt afresh, so "
                           "this is that delivery sent again, not a retry (who sent it -- an "
                           "attacker, a proxy, a queue -- the capture does not say)",
                           copy_at, original_at, later, more, provider);
    case Cause::re_serialized:
        if (original == k_no_original || verdict)
            return fmt::format("{}{}: the same JSON as {} in other bytes{}: re-encoded after it "
                               "was signed (a proxy or a queue), so its signature no longer "
                               "matches",
                               copy_at, more, original == k_no_original ? "the rest" : original_at,
                               verdict ? fmt::format(" (verify: {})", verdict->reason) : "");
        return fmt::format("{} carries {}'s signature over bytes re-encoded to the same JSON{}: "
                           "re-serialized on the way (a proxy or a queue), not sent again by {}",
                           copy_at, original_at, more, provider);
    default:
        if (original == k_no_original || verdict)
            return fmt::format("{}{}: its signature does not match its body{}, which differs from "
                               "{}: changed after it was signed",
                               copy_at, more,
                               verdict ? fmt::format(" (verify: {})", verdict->reason) : "",
                               original == k_no_original ? "the others" : original_at);
        return fmt::format("{} carries {}'s signature over a different body{}: changed after it "
                           "was signed, not a retry by {}",
                           copy_at, original_at, more, provider);
    }
}

// One sentence per cause, from its evidence.
std::string describe(const Findings& findings, const Explanation& group, const Evidence& evidence) {
    auto record = [&](std::size_t index) -> const Attempt& {
        return findings.attempts[group.records[index]];
    };
    switch (evidence.cause) {
    case Cause::retry_storm: {
        auto source = plain(findings.sources[evidence.source]);
        return fmt::format("{} attempts from {}, gaps {}", evidence.records.size(),
                           source.empty() ? "one sender (no --source-field)" : source,
                           gap_list(evidence.gaps));
    }
    case Cause::retried_after_failure: {
        std::vector<std::string> answers;
        std::size_t failed = 0;
        for (auto index : evidence.records) {
            auto status = record(index).status;
            if (!is_failed_answer(status)) continue;
            ++failed;
            if (answers.size() < 6)
                answers.push_back(status == k_no_answer ? "no answer" : std::to_string(status));
        }
        return fmt::format("resent after {} failed answer{} ({}{}), waits {}", failed,
                           failed == 1 ? "" : "s", fmt::join(answers, ", "),
                           failed > answers.size() ? ", ..." : "", gap_list(evidence.gaps));
    }
    case Cause::concurrent: {
        std::set<std::string> sources;
        for (auto index : evidence.records)
            sources.insert(findings.sources[record(index).source]);
        auto closest = *std::min_element(evidence.gaps.begin(), evidence.gaps.end());
        return fmt::format("{} records from {} sources within {} (closest {} apart)",
                           evidence.records.size(), sources.size(),
                           short_duration(findings.options.race_window), short_duration(closest));
    }
    case Cause::ttl_expired:
        return fmt::format("came {} after its key's claim, past the {} TTL",
                           gap_list(evidence.gaps), short_duration(findings.options.ttl));
    case Cause::key_reuse: {
        std::vector<std::string> at;
        for (auto index : evidence.records)
            at.push_back(findings.position(group.records[index]));
        return fmt::format("{} payloads under one key, first at {}", at.size(),
                           positions_text(findings, at));
    }
    case Cause::key_regenerated: {
        std::vector<std::string> keys;
        for (auto index : evidence.records)
            keys.push_back(plain(findings.key(record(index).key)));
        return fmt::format("{} keys for one intent within {}: {}", keys.size(),
                           short_duration(findings.options.window), fmt::join(keys, ", "));
    }
    case Cause::provider_retry:
    case Cause::layered_retry:
        return evidence.detail;
    case Cause::replayed_delivery:
    case Cause::tampered:
    case Cause::re_serialized:
        return describe_signed_copies(findings, group, evidence);
    case Cause::fan_out: {
        std::vector<std::string> routes;
        for (auto index : evidence.records) {
            const auto& trace = record(index).trace;
            auto endpoint = findings.sources[trace.endpoint];
            auto subscription = findings.sources[trace.subscription];
            routes.push_back(evidence.detail == "endpoint" || subscription.empty() ? endpoint
                                                                                   : subscription);
        }
        auto widest = *std::max_element(evidence.gaps.begin(), evidence.gaps.end());
        return fmt::format("one event delivered to {} {}s within {}: {}", routes.size(),
                           evidence.detail, short_duration(widest), fmt::join(routes, ", "));
    }
    case Cause::unexplained:
        return "no cause fits the evidence: the same intent, and nothing more is known";
    }
    return {};
}

std::string describe_replay(const store::ReplayEntry& entry) {
    auto attempts = fmt::format("{} attempt{}", entry.attempts, entry.attempts == 1 ? "" : "s");
    auto status = entry.status ? fmt::format("last status {}", entry.status) : "no answer";
    switch (entry.state) {
    case store::ReplayState::completed:
        return fmt::format("completed after {} ({}, {} ms)", attempts, status, entry.latency_ms);
    case store::ReplayState::failed:
        return fmt::format("failed{} after {}: {} ({})", entry.permanent ? " for good" : "",
                           attempts, entry.error, status);
    case store::ReplayState::in_progress:
        return fmt::format("still in progress after {} ({})", attempts, status);
    }
    return {};
}

std::optional<std::string> describe_verdicts(const Findings& findings, const Explanation& group) {
    if (!findings.verdicts) return std::nullopt;
    std::size_t valid = 0, invalid = 0;
    std::string first_invalid;
    for (auto index : group.records) {
        const auto* verdict = findings.verdict_of(index);
        if (!verdict) continue;
        if (verdict->valid) {
            ++valid;
            continue;
        }
        if (invalid++ == 0)
            first_invalid =
                fmt::format("{}: {}", position_names(findings, {findings.position(index)}).front(),
                            verdict->reason);
    }
    if (valid + invalid == 0) return std::nullopt;
    auto text = fmt::format("{} valid, {} invalid", valid, invalid);
    if (invalid > 0) text += fmt::format(" ({})", first_invalid);
    if (auto unchecked = group.records.size() - valid - invalid)
        text += fmt::format(", {} not checked", unchecked);
    return text;
}

std::vector<std::string> describe_differences(const Findings& findings, const Explanation& group) {
    std::vector<std::string> lines;
    const auto* comparisons = findings.differences_of(group);
    if (!comparisons) return lines;
    for (const auto& comparison : *comparisons) {
        auto names = position_names(findings, {comparison.later_at, comparison.first_at});
        std::vector<std::string> fields;
        for (const auto& field : comparison.fields)
            fields.push_back(describe_difference(field));
        if (comparison.more) fields.push_back(fmt::format("and {} more", comparison.more));
        lines.push_back(
            fields.empty()
                ? fmt::format("{} against {}: the same when read again (did the "
                              "file change?)",
                              names[0], names[1])
                : fmt::format("{} against {}: {}", names[0], names[1], fmt::join(fields, "; ")));
    }
    return lines;
}

std::string cause_list(const Explanation& group) {
    std::vector<std::string_view> names;
    for (const auto& evidence : group.causes)
        names.push_back(cause_name(evidence.cause));
    return fmt::format("{}", fmt::join(names, ", "));
}

std::string span_of(const Explanation& group) {
    return group.first && group.last ? short_duration(*group.last - *group.first) : "-";
}

std::optional<std::string> describe_per_delivery(const FindingsSummary& summary) {
    if (summary.per_delivery.empty()) return std::nullopt;
    constexpr std::size_t k_named = 8;
    std::vector<std::string> named(
        summary.per_delivery.begin(),
        summary.per_delivery.begin() +
            static_cast<std::ptrdiff_t>(std::min(k_named, summary.per_delivery.size())));
    if (summary.per_delivery.size() > k_named)
        named.push_back(fmt::format("{} more", summary.per_delivery.size() - k_named));
    return fmt::format("treated as per-delivery, not payload: {} (learned from how the copies of "
                       "the log's {} retried group{} differ; --volatile adds a field, "
                       "--no-learn-volatile compares them as payload; dedup of whole events "
                       "leaves them out with --ignore {})",
                       fmt::join(named, ", "), summary.per_delivery_groups,
                       summary.per_delivery_groups == 1 ? "" : "s",
                       fmt::join(summary.per_delivery, ","));
}

std::optional<std::string> describe_intent_window(const FindingsSummary& summary) {
    if (!summary.intent_window) return std::nullopt;
    return fmt::format("intents: one fingerprint within {} of its first record (--window); a "
                       "later record of it starts a new one",
                       format_duration(*summary.intent_window));
}

} // namespace idem::audit::detail
