// The three text reports of `idem audit`. JSON is built with nlohmann (it is
// a document, not a per-record path); the table and Markdown with fmt.

#include "idem/audit/report.hpp"

#include "idem/audit/detail/wording.hpp"

#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace idem::audit {

FindingsSummary summarize(const Findings& findings) {
    FindingsSummary summary;
    summary.records = findings.attempts.size();
    summary.groups = findings.groups.size();
    // One intent per fingerprint (with --fingerprint), else per key.
    std::set<std::uint32_t> intents;
    std::uint64_t identified = 0;
    for (const auto& attempt : findings.attempts) {
        auto intent = findings.fingerprinted ? attempt.fingerprint : attempt.key;
        if (intent == 0) continue;
        ++identified;
        intents.insert(intent);
    }
    summary.duplicates = identified - intents.size();
    summary.duplicate_ratio = summary.records == 0 ? 0
                                                   : static_cast<double>(summary.duplicates) /
                                                         static_cast<double>(summary.records);
    std::unordered_map<std::uint32_t, std::uint64_t> by_source;
    std::set<std::size_t> counted;
    for (std::size_t g = 0; g < findings.groups.size(); ++g) {
        const auto& group = findings.groups[g];
        if (group.records.size() > findings.groups[summary.worst].records.size()) summary.worst = g;
        for (const auto& evidence : group.causes)
            ++summary.causes[evidence.cause];
        for (auto record : group.records)
            if (counted.insert(record).second) ++by_source[findings.attempts[record].source];
    }
    for (const auto& [source, count] : by_source)
        summary.sources.emplace_back(
            findings.sources[source].empty() ? "(none)" : findings.sources[source], count);
    std::sort(summary.sources.begin(), summary.sources.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return summary;
}

namespace {

using namespace detail;

std::string fit(std::string line, std::size_t width = 80) {
    if (line.size() <= width) return line;
    line.resize(width - 3);
    return line + "...";
}

std::string render_table(const Findings& findings) {
    auto summary = summarize(findings);
    std::string out;
    out += fit(fmt::format("idem audit: {} records, {} group{}, {} duplicates ({:.1f}%)",
                           summary.records, summary.groups, summary.groups == 1 ? "" : "s",
                           summary.duplicates, summary.duplicate_ratio * 100)) +
           "\n";
    if (summary.groups == 0) return out + "no record happened more than once\n";
    const auto& worst = findings.groups[summary.worst];
    out += fit(fmt::format("worst: {} records for {}", worst.records.size(),
                           group_label(findings, worst))) +
           "\n";
    std::vector<std::string> causes, sources;
    for (const auto& [cause, count] : summary.causes)
        causes.push_back(fmt::format("{} {}", cause_name(cause), count));
    for (const auto& [source, count] : summary.sources)
        sources.push_back(fmt::format("{} {}", source, count));
    out += fit("causes: " + fmt::format("{}", fmt::join(causes, ", "))) + "\n";
    out += fit("sources: " + fmt::format("{}", fmt::join(sources, ", "))) + "\n";
    for (std::size_t g = 0; g < findings.groups.size(); ++g) {
        const auto& group = findings.groups[g];
        out += '\n';
        out +=
            fit(fmt::format("#{} {} records over {} from {} source{}, {}", g + 1,
                            group.records.size(), span_of(group), group.sources.size(),
                            group.sources.size() == 1 ? "" : "s", group_label(findings, group))) +
            "\n";
        if (group.first)
            out += fit(fmt::format("   first {}  last {}", format_rfc3339(*group.first),
                                   format_rfc3339(*group.last))) +
                   "\n";
        for (const auto& evidence : group.causes)
            out += fit(fmt::format("   {:<16} {}", cause_name(evidence.cause),
                                   describe(findings, group, evidence))) +
                   "\n";
    }
    return out;
}

nlohmann::json json_or_null(const std::string& text) {
    if (text.empty()) return nullptr;
    return nlohmann::json::parse(text, nullptr, false);
}

nlohmann::json time_json(const std::optional<Timestamp>& at) {
    if (!at) return nullptr;
    return format_rfc3339(*at);
}

nlohmann::json group_json(const Findings& findings, const Explanation& group) {
    const auto& first = findings.attempts[group.records.front()];
    nlohmann::json json;
    json["kind"] = group.kind == GroupKind::key ? "key" : "fingerprint";
    json["key"] = group.kind == GroupKind::key ? json_or_null(findings.keys[first.key]) : nullptr;
    json["fingerprint"] = json_or_null(findings.fingerprints[first.fingerprint]);
    json["count"] = group.records.size();
    json["first"] = time_json(group.first);
    json["last"] = time_json(group.last);
    json["span_seconds"] =
        group.first && group.last ? nlohmann::json(seconds(*group.last - *group.first)) : nullptr;
    auto& sources = json["sources"] = nlohmann::json::array();
    for (auto source : group.sources)
        sources.push_back(findings.sources[source]);
    auto& gaps = json["gaps_seconds"] = nlohmann::json::array();
    for (auto gap : group.gaps)
        gaps.push_back(seconds(gap));
    json["payloads"] = group.payloads;
    json["keys"] = group.keys;
    auto& causes = json["causes"] = nlohmann::json::array();
    auto& evidence_json = json["evidence"] = nlohmann::json::object();
    for (const auto& evidence : group.causes) {
        causes.push_back(cause_name(evidence.cause));
        nlohmann::json item;
        item["records"] = evidence.records;
        auto& item_gaps = item["gaps_seconds"] = nlohmann::json::array();
        for (auto gap : evidence.gaps)
            item_gaps.push_back(seconds(gap));
        if (evidence.cause == Cause::retry_storm)
            item["source"] = findings.sources[evidence.source];
        item["summary"] = describe(findings, group, evidence);
        evidence_json[std::string(cause_name(evidence.cause))] = std::move(item);
    }
    auto& records = json["records"] = nlohmann::json::array();
    for (auto index : group.records) {
        const auto& attempt = findings.attempts[index];
        records.push_back({{"at", findings.positions[index]},
                           {"time", time_json(attempt.time)},
                           {"source", findings.sources[attempt.source]},
                           {"key", json_or_null(findings.keys[attempt.key])},
                           {"payload", findings.payloads[attempt.payload]}});
    }
    return json;
}

std::string render_json(const Findings& findings) {
    auto summary = summarize(findings);
    nlohmann::json report;
    auto& json = report["summary"];
    json["records"] = summary.records;
    json["groups"] = summary.groups;
    json["duplicates"] = summary.duplicates;
    json["duplicate_ratio"] = summary.duplicate_ratio;
    json["worst_amplification"] =
        summary.groups == 0 ? nlohmann::json(nullptr)
                            : nlohmann::json(findings.groups[summary.worst].records.size());
    auto& causes = json["causes"] = nlohmann::json::object();
    for (const auto& [cause, count] : summary.causes)
        causes[std::string(cause_name(cause))] = count;
    auto& sources = json["sources"] = nlohmann::json::object();
    for (const auto& [source, count] : summary.sources)
        sources[source] = count;
    auto& groups = report["groups"] = nlohmann::json::array();
    for (const auto& group : findings.groups)
        groups.push_back(group_json(findings, group));
    return report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

// Markdown tables break on '|' and newlines in values.
std::string cell(std::string text) {
    std::string out;
    for (char c : text) {
        if (c == '|')
            out += "\\|";
        else if (c == '\n' || c == '\r')
            out += ' ';
        else
            out += c;
    }
    return out;
}

std::string render_markdown(const Findings& findings) {
    auto summary = summarize(findings);
    std::string out = "## idem audit\n\n";
    out += fmt::format("- **{}** records, **{}** groups, **{}** duplicates ({:.1f}%)\n",
                       summary.records, summary.groups, summary.duplicates,
                       summary.duplicate_ratio * 100);
    if (summary.groups == 0) return out + "- no record happened more than once\n";
    const auto& worst = findings.groups[summary.worst];
    out += fmt::format("- worst amplification: **{}** records for {}\n", worst.records.size(),
                       cell(group_label(findings, worst)));
    for (const auto& [cause, count] : summary.causes)
        out += fmt::format("- `{}`: {} group{}\n", cause_name(cause), count, count == 1 ? "" : "s");
    out += "\n| # | records | span | sources | causes | group |\n|---|---|---|---|---|---|\n";
    for (std::size_t g = 0; g < findings.groups.size(); ++g) {
        const auto& group = findings.groups[g];
        std::vector<std::string> sources;
        for (auto source : group.sources)
            sources.push_back(findings.sources[source]);
        out += fmt::format("| {} | {} | {} | {} | {} | {} |\n", g + 1, group.records.size(),
                           span_of(group), cell(fmt::format("{}", fmt::join(sources, ", "))),
                           cause_list(group), cell(group_label(findings, group)));
    }
    for (std::size_t g = 0; g < findings.groups.size(); ++g) {
        const auto& group = findings.groups[g];
        out += fmt::format("\n### #{} {}\n\n", g + 1, cell(group_label(findings, group)));
        for (const auto& evidence : group.causes)
            out += fmt::format("- **{}**: {}\n", cause_name(evidence.cause),
                               cell(describe(findings, group, evidence)));
        out += "\n| at | time | source | key | payload |\n|---|---|---|---|---|\n";
        for (auto index : group.records) {
            const auto& attempt = findings.attempts[index];
            out += fmt::format("| {} | {} | {} | {} | `{}` |\n", cell(findings.positions[index]),
                               attempt.time ? format_rfc3339(*attempt.time) : "-",
                               cell(findings.sources[attempt.source]),
                               cell(plain(findings.keys[attempt.key])),
                               findings.payloads[attempt.payload]);
        }
    }
    return out;
}

} // namespace

std::string render(const Findings& findings, ReportFormat format) {
    switch (format) {
    case ReportFormat::table:
        return render_table(findings);
    case ReportFormat::json:
        return render_json(findings);
    case ReportFormat::markdown:
        return render_markdown(findings);
    case ReportFormat::html:
        return render_html(findings);
    }
    return {};
}

} // namespace idem::audit
