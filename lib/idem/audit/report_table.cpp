// The table report of `idem audit`: what a terminal shows, fitted to its width.

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

void render_table(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                  std::size_t threads, std::size_t width) {
    TableLine fit{width};
    auto& out = report.text();
    out += fit(fmt::format("idem audit: {} record{}, {} group{}, {} duplicate{} ({:.1f}%)",
                           summary.records, summary.records == 1 ? "" : "s", summary.groups,
                           summary.groups == 1 ? "" : "s", summary.duplicates,
                           summary.duplicates == 1 ? "" : "s", summary.duplicate_ratio * 100)) +
           "\n";
    if (summary.groups == 0) {
        out += "no record happened more than once\n";
        if (auto learned = describe_per_delivery(summary)) out += fit(*learned) + "\n";
        if (auto window = describe_intent_window(summary)) out += fit(*window) + "\n";
        render_what_if(summary, out, false, fit); // another key may have repeats
        return;
    }
    {
        auto worst = groups.at(summary.worst);
        out += fit(fmt::format("worst: {} records for {}", worst.group.records.size(),
                               group_label(worst.findings, worst.group))) +
               "\n";
    }
    std::vector<std::string> causes, sources;
    for (const auto& [cause, count] : summary.causes)
        causes.push_back(fmt::format("{} {}", cause_name(cause), count));
    for (const auto& [source, count] : summary.sources)
        sources.push_back(fmt::format("{} {}", source, count));
    out += fit("causes: " + fmt::format("{}", fmt::join(causes, ", "))) + "\n";
    out += fit("sources: " + fmt::format("{}", fmt::join(sources, ", "))) + "\n";
    if (auto learned = describe_per_delivery(summary)) out += fit(*learned) + "\n";
    if (auto window = describe_intent_window(summary)) out += fit(*window) + "\n";
    render_what_if(summary, out, false, fit);
    render_groups(
        groups, report, threads,
        [fit](const Findings& findings, const Explanation& group, std::size_t g,
              std::string& text) {
            text += '\n';
            text += fit(fmt::format("#{} {} records {} from {} source{}, {}", g + 1,
                                    group.records.size(),
                                    group.first ? "over " + span_of(group) : "without a time",
                                    group.sources.size(), group.sources.size() == 1 ? "" : "s",
                                    group_label(findings, group))) +
                    "\n";
            if (group.first)
                text += fit(fmt::format("   first {}  last {}", format_rfc3339(*group.first),
                                        format_rfc3339(*group.last))) +
                        "\n";
            for (const auto& evidence : group.causes)
                text += fit(fmt::format("   {:<16} {}", cause_name(evidence.cause),
                                        describe(findings, group, evidence))) +
                        "\n";
            if (const auto* entry = findings.replay_of(group))
                text += fit(fmt::format("   {:<16} {}", "replay ledger", describe_replay(*entry))) +
                        "\n";
            if (auto verdicts = describe_verdicts(findings, group))
                text += fit(fmt::format("   {:<16} {}", "verify", *verdicts)) + "\n";
            for (const auto& line : describe_differences(findings, group))
                text += fit(fmt::format("   {:<16} {}", "differs", line)) + "\n";
        });
}

} // namespace idem::audit::detail
