// The JSON report of `idem audit`: the summary with nlohmann (a document),
// the groups by hand, one per line (a million of them build no DOM).

#include "idem/audit/detail/report_out.hpp"
#include "idem/audit/detail/wording.hpp"
#include "idem/record/annotate.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>

namespace idem::audit::detail {

// JSON by hand for the groups: keys and intents are already JSON text, and a
// report of a million records should not build a DOM of them first.
void append_json_text(std::string& out, const std::string& json) {
    out += json.empty() ? "null" : json;
}

void append_time(std::string& out, const std::optional<Timestamp>& at) {
    if (!at) {
        out += "null";
        return;
    }
    out += '"'; // nothing in a timestamp needs escaping
    append_rfc3339(out, *at);
    out += '"';
}

void append_seconds(std::string& out, const std::vector<Duration>& gaps) {
    out += '[';
    for (std::size_t i = 0; i < gaps.size(); ++i)
        fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", seconds(gaps[i]));
    out += ']';
}

// "replay":{...}: what the ledger kept for the group's key.
void append_replay(std::string& out, const store::ReplayEntry& entry) {
    out += R"(,"replay":{"state":)";
    record::append_json_string(out, store::replay_state_name(entry.state));
    fmt::format_to(std::back_inserter(out), R"(,"attempts":{},"status":{},"latency_ms":{})",
                   entry.attempts, entry.status, entry.latency_ms);
    out += R"(,"error":)";
    record::append_json_string(out, entry.error);
    out += R"(,"updated_at":)";
    append_time(out, entry.updated_at);
    out += '}';
}

// "differences":[{"at","against","fields":[{"path","before","after"}],
// "more"}]: only for a group that mixes payloads whose records were read
// again. Values are the JSON values; null where the field is absent (a
// field holding null reads "null" in the text formats, "(absent)" there).
void append_differences(std::string& out, const Findings& findings, const Explanation& group) {
    const auto* comparisons = findings.differences_of(group);
    if (!comparisons) return;
    out += R"(,"differences":[)";
    for (std::size_t c = 0; c < comparisons->size(); ++c) {
        const auto& comparison = (*comparisons)[c];
        out += c ? R"(,{"at":)" : R"({"at":)";
        record::append_json_string(out, json_report_text(comparison.later_at));
        out += R"(,"against":)";
        record::append_json_string(out, json_report_text(comparison.first_at));
        out += R"(,"fields":[)";
        for (std::size_t f = 0; f < comparison.fields.size(); ++f) {
            const auto& field = comparison.fields[f];
            out += f ? R"(,{"path":)" : R"({"path":)";
            record::append_json_string(out, json_report_text(field.path));
            for (auto [name, value] : {std::pair{R"(,"before":)", &field.before},
                                       std::pair{R"(,"after":)", &field.after}}) {
                out += name;
                // The value itself, every non-ASCII character escaped: no
                // control or bidi character reaches a reader raw.
                out += *value ? nlohmann::json::parse(**value, nullptr, false)
                                    .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
                              : std::string("null");
            }
            out += '}';
        }
        fmt::format_to(std::back_inserter(out), R"(],"more":{}}})", comparison.more);
    }
    out += ']';
}

// "verdicts":{"valid":N,"invalid":M,"unchecked":K}: only when verify kept
// a verdict for one of the group's records.
void append_verdict_counts(std::string& out, const Findings& findings, const Explanation& group) {
    if (!findings.verdicts) return;
    std::size_t valid = 0, invalid = 0;
    for (auto index : group.records)
        if (const auto* verdict = findings.verdict_of(index)) ++(verdict->valid ? valid : invalid);
    if (valid + invalid == 0) return;
    fmt::format_to(std::back_inserter(out),
                   R"(,"verdicts":{{"valid":{},"invalid":{},"unchecked":{}}})", valid, invalid,
                   group.records.size() - valid - invalid);
}

void append_group(std::string& out, const Findings& findings, const Explanation& group) {
    const auto& first = findings.attempts[group.records.front()];
    auto key = group.kind == GroupKind::key ? findings.key(first.key) : std::string();
    out += group.kind == GroupKind::key ? R"({"kind":"key","key":)"
                                        : R"({"kind":"fingerprint","key":)";
    append_json_text(out, key);
    out += R"(,"fingerprint":)";
    append_json_text(out, findings.fingerprint(first.fingerprint));
    out += R"(,"count":)";
    append_decimal(out, group.records.size());
    out += R"(,"first":)";
    append_time(out, group.first);
    out += R"(,"last":)";
    append_time(out, group.last);
    out += R"(,"span_seconds":)";
    if (group.first && group.last)
        fmt::format_to(std::back_inserter(out), "{}", seconds(*group.last - *group.first));
    else
        out += "null";
    out += R"(,"sources":[)";
    for (std::size_t i = 0; i < group.sources.size(); ++i) {
        if (i) out += ',';
        record::append_json_string(out, findings.sources[group.sources[i]]);
    }
    out += R"(],"gaps_seconds":)";
    append_seconds(out, group.gaps);
    out += R"(,"payloads":)";
    append_decimal(out, group.payloads);
    out += R"(,"keys":)";
    append_decimal(out, group.keys);
    out += R"(,"causes":[)";
    for (std::size_t i = 0; i < group.causes.size(); ++i) {
        out += i ? ",\"" : "\"";
        out += cause_name(group.causes[i].cause);
        out += '"';
    }
    out += R"(],"evidence":{)";
    for (std::size_t i = 0; i < group.causes.size(); ++i) {
        const auto& evidence = group.causes[i];
        out += i ? ",\"" : "\"";
        out += cause_name(evidence.cause);
        out += R"(":{"records":[)";
        for (std::size_t r = 0; r < evidence.records.size(); ++r) {
            if (r) out += ',';
            append_decimal(out, evidence.records[r]);
        }
        out += R"(],"gaps_seconds":)";
        append_seconds(out, evidence.gaps);
        if (evidence.cause == Cause::retry_storm) {
            out += R"(,"source":)";
            record::append_json_string(out, findings.sources[evidence.source]);
        }
        if (evidence.cause == Cause::provider_retry) {
            const auto& copy = findings.attempts[group.records[evidence.records.front()]];
            fmt::format_to(std::back_inserter(out), R"(,"provider":"{}","attempts":[{}])",
                           provider_name(copy.trace.provider),
                           fmt::join(evidence.attempt_numbers, ","));
        }
        if (evidence.cause == Cause::fan_out) {
            out += R"(,"differs":)";
            record::append_json_string(out, evidence.detail);
        }
        out += R"(,"summary":)";
        record::append_json_string(out, describe(findings, group, evidence));
        out += '}';
    }
    out += '}';
    if (const auto* entry = findings.replay_of(group)) append_replay(out, *entry);
    append_verdict_counts(out, findings, group);
    append_differences(out, findings, group);
    out += R"(,"records":[)";
    std::string position;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        auto index = group.records[i];
        const auto& attempt = findings.attempts[index];
        out += i ? R"(,{"at":)" : R"({"at":)";
        position.clear();
        findings.append_position(position, index);
        record::append_json_string(out, position);
        out += R"(,"time":)";
        append_time(out, attempt.time);
        out += R"(,"source":)";
        record::append_json_string(out, findings.sources[attempt.source]);
        out += R"(,"key":)";
        append_json_text(out, findings.key(attempt.key));
        out += R"(,"payload":")";
        Findings::append_payload_hex(out, attempt);
        out += '"';
        // What the receiver answered it, when the evidence says.
        if (attempt.status == k_no_answer)
            out += R"(,"answered":"none")";
        else if (attempt.status != 0) {
            out += R"(,"answered":)";
            append_decimal(out, attempt.status);
        }
        if (const auto* verdict = findings.verdict_at(position)) {
            out += verdict->valid ? R"(,"verdict":{"valid":true,"reason":)"
                                  : R"(,"verdict":{"valid":false,"reason":)";
            record::append_json_string(out, verdict->reason);
            out += '}';
        }
        out += '}';
    }
    out += "]}";
}

// The summary is small: nlohmann, indented. The groups follow one per line.
void render_json(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                 std::size_t threads) {
    nlohmann::json json;
    json["records"] = summary.records;
    json["groups"] = summary.groups;
    json["duplicates"] = summary.duplicates;
    json["duplicate_ratio"] = summary.duplicate_ratio;
    json["worst_amplification"] =
        summary.groups == 0 ? nlohmann::json(nullptr)
                            : nlohmann::json(groups.at(summary.worst).group.records.size());
    auto& causes = json["causes"] = nlohmann::json::object();
    for (const auto& [cause, count] : summary.causes)
        causes[std::string(cause_name(cause))] = count;
    auto& sources = json["sources"] = nlohmann::json::object();
    for (const auto& [source, count] : summary.sources)
        sources[source] = count;
    json["per_delivery"] = {{"fields", summary.per_delivery},
                            {"learned_from_groups", summary.per_delivery_groups}};
    if (summary.intent_window) json["intent_window_seconds"] = seconds(*summary.intent_window);
    if (summary.what_if) json["what_if"] = what_if_json(summary);
    auto& out = report.text();
    out += "{\"summary\": ";
    out += json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    out += ",\n\"groups\": [";
    render_groups(
        groups, report, threads,
        [](const Findings& findings, const Explanation& group, std::size_t g, std::string& text) {
            text += g ? ",\n  " : "\n  ";
            append_group(text, findings, group);
        });
    report.text() += groups.size() == 0 ? "]}\n" : "\n]}\n";
}

} // namespace idem::audit::detail
