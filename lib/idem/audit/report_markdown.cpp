// The Markdown report of `idem audit`, for a postmortem document.

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

// Markdown tables break on '|' and newlines in values.
void render_markdown(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                     std::size_t threads) {
    auto& out = report.text();
    out += "## idem audit\n\n";
    out += fmt::format("- **{}** records, **{}** groups, **{}** duplicates ({:.1f}%)\n",
                       summary.records, summary.groups, summary.duplicates,
                       summary.duplicate_ratio * 100);
    if (summary.groups == 0) {
        out += "- no record happened more than once\n";
        render_what_if(summary, out, true); // another key may have repeats
        return;
    }
    {
        auto worst = groups.at(summary.worst);
        out += fmt::format("- worst amplification: **{}** records for {}\n",
                           worst.group.records.size(),
                           markdown_text(group_label(worst.findings, worst.group)));
    }
    for (const auto& [cause, count] : summary.causes)
        out += fmt::format("- `{}`: {} group{}\n", cause_name(cause), count, count == 1 ? "" : "s");
    if (auto learned = describe_per_delivery(summary))
        out += fmt::format("- {}\n", markdown_text(*learned));
    if (auto window = describe_intent_window(summary))
        out += fmt::format("- {}\n", markdown_text(*window));
    render_what_if(summary, out, true);
    out += "\n| # | records | span | sources | causes | group |\n|---|---|---|---|---|---|\n";
    render_groups(
        groups, report, threads,
        [](const Findings& findings, const Explanation& group, std::size_t g, std::string& text) {
            std::vector<std::string> sources;
            for (auto source : group.sources)
                sources.push_back(findings.sources[source]);
            text += fmt::format("| {} | {} | {} | {} | {} | {} |\n", g + 1, group.records.size(),
                                span_of(group),
                                markdown_text(fmt::format("{}", fmt::join(sources, ", "))),
                                cause_list(group), markdown_text(group_label(findings, group)));
        });
    render_groups(
        groups, report, threads,
        [](const Findings& findings, const Explanation& group, std::size_t g, std::string& text) {
            text +=
                fmt::format("\n### #{} {}\n\n", g + 1, markdown_text(group_label(findings, group)));
            for (const auto& evidence : group.causes)
                text += fmt::format("- **{}**: {}\n", cause_name(evidence.cause),
                                    markdown_text(describe(findings, group, evidence)));
            if (const auto* entry = findings.replay_of(group))
                text += fmt::format("- **replay ledger**: {}\n",
                                    markdown_text(describe_replay(*entry)));
            if (auto verdicts = describe_verdicts(findings, group))
                text += fmt::format("- **verify**: {}\n", markdown_text(*verdicts));
            for (const auto& line : describe_differences(findings, group))
                text += fmt::format("- **differs**: {}\n", markdown_text(line));
            text += "\n| at | time | source | key | payload |\n|---|---|---|---|---|\n";
            for (auto index : group.records) {
                const auto& attempt = findings.attempts[index];
                text += fmt::format("| {} | {} | {} | {} | `{}` |\n",
                                    markdown_text(findings.position(index)),
                                    attempt.time ? format_rfc3339(*attempt.time) : "-",
                                    markdown_text(findings.sources[attempt.source]),
                                    markdown_text(plain(findings.key(attempt.key))),
                                    Findings::payload_hex(attempt));
            }
        });
}

} // namespace idem::audit::detail
