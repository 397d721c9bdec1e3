// `idem audit --format html`: one self-contained file for a postmortem. No
// network: styles and script are inline, the chart is SVG drawn here, and a
// Content-Security-Policy forbids the page to load anything at all.

#include "idem/audit/detail/wording.hpp"
#include "idem/audit/report.hpp"
#include "idem/crypto/crypto.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <map>

namespace idem::audit {

namespace {

using namespace detail;

constexpr const char* k_palette[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                     "#ff7f0e", "#17becf", "#8c564b", "#e377c2"};
constexpr std::size_t k_chart_groups = 10;

constexpr const char* k_style = R"(
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1000px; color: #222; }
h1 { font-size: 1.6em; } h2 { font-size: 1.2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border-bottom: 1px solid #ddd; padding: .3em .6em; text-align: left; vertical-align: top; }
th { cursor: pointer; background: #f4f4f4; user-select: none; }
th[aria-sort=ascending]::after { content: " \25B2"; } th[aria-sort=descending]::after { content: " \25BC"; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
code, .mono { font-family: ui-monospace, monospace; font-size: .92em; }
.cause { display: inline-block; padding: 0 .4em; margin: 0 .2em .2em 0; border-radius: 3px; background: #eef; }
.ledger { display: inline-block; padding: 0 .4em; margin: 0 .2em .2em 0; border-radius: 3px; background: #efe; }
details { margin: .6em 0; } summary { cursor: pointer; font-weight: 600; }
svg text { font: 12px system-ui, sans-serif; fill: #333; }
)";

// Sorts the groups table by the clicked column; marks the page ready and
// counts what it loaded (nothing), for the headless browser test.
constexpr const char* k_script = R"(
(function () {
  var table = document.getElementById('groups-table');
  var headers = table.tHead.rows[0].cells;
  Array.prototype.forEach.call(headers, function (th, column) {
    th.addEventListener('click', function () {
      var ascending = th.getAttribute('aria-sort') !== 'ascending';
      Array.prototype.forEach.call(headers, function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', ascending ? 'ascending' : 'descending');
      var numeric = th.dataset.type === 'number';
      var rows = Array.prototype.slice.call(table.tBodies[0].rows);
      rows.sort(function (a, b) {
        var x = a.cells[column].dataset.value || a.cells[column].textContent;
        var y = b.cells[column].dataset.value || b.cells[column].textContent;
        var order = numeric ? parseFloat(x) - parseFloat(y) : x.localeCompare(y);
        return ascending ? order : -order;
      });
      rows.forEach(function (row) { table.tBodies[0].appendChild(row); });
    });
  });
  document.documentElement.dataset.ready = '1';
  document.documentElement.dataset.resources =
    String(performance.getEntriesByType('resource').length);
})();
)";

// One row per group: its attempts as dots along its own span, coloured by
// source, so a retry storm's widening gaps and a race's overlap show.
std::string timeline(GroupShelf& groups, const std::vector<std::string>& source_names,
                     const std::map<std::uint32_t, std::size_t>& colours) {
    auto rows = std::min(groups.size(), k_chart_groups);
    constexpr int k_left = 260, k_width = 600, k_row = 28, k_top = 10;
    auto height = k_top * 2 + static_cast<int>(rows) * k_row + 30;
    std::string svg = fmt::format(
        R"(<svg id="timeline-chart" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" )"
        R"(role="img" aria-label="attempts per group over time">)",
        k_left + k_width + 80, height);
    for (std::size_t g = 0; g < rows; ++g) {
        auto [findings, group] = groups.at(g);
        auto y = k_top + static_cast<int>(g) * k_row + k_row / 2;
        // Cut by display width, on a character boundary, after escaping.
        auto label =
            fit_line(terminal_text(fmt::format("#{} {}", g + 1, group_label(findings, group))), 36);
        svg += fmt::format(R"(<text x="0" y="{}">{}</text>)", y + 4, html_escape(label));
        svg += fmt::format(R"(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="#bbb"/>)", k_left,
                           k_left + k_width, y, y);
        svg += fmt::format(R"(<text x="{}" y="{}">{}</text>)", k_left + k_width + 8, y + 4,
                           html_escape(span_of(group)));
        auto span = group.first && group.last ? seconds(*group.last - *group.first) : 0.0;
        for (auto index : group.records) {
            const auto& attempt = findings.attempts[index];
            auto offset = attempt.time && group.first && span > 0
                              ? seconds(*attempt.time - *group.first) / span
                              : 0.0;
            auto colour = k_palette[colours.at(attempt.source) % std::size(k_palette)];
            svg += fmt::format(
                R"(<circle class="attempt" cx="{:.1f}" cy="{}" r="5" fill="{}" fill-opacity="0.8">)"
                R"(<title>{} {}</title></circle>)",
                k_left + offset * k_width, y, colour, html_escape(findings.sources[attempt.source]),
                attempt.time ? format_rfc3339(*attempt.time) : "(no time)");
        }
    }
    // The legend: one swatch per source.
    int x = 0;
    auto legend_y = k_top + static_cast<int>(rows) * k_row + 20;
    for (const auto& [source, colour] : colours) {
        auto name = source_names[source].empty() ? "(no source)" : source_names[source];
        svg +=
            fmt::format(R"(<circle cx="{}" cy="{}" r="5" fill="{}"/><text x="{}" y="{}">{}</text>)",
                        x + 5, legend_y, k_palette[colour % std::size(k_palette)], x + 14,
                        legend_y + 4, html_escape(name));
        x += 24 + static_cast<int>(display_width(terminal_text(name))) * 7;
        if (x > k_left + k_width) break;
    }
    return svg + "</svg>";
}

std::string group_details(const Findings& findings, const Explanation& group, std::size_t g) {
    std::string out =
        fmt::format("<details{}><summary>#{} {} — {} records over {}</summary><ul>",
                    g < 3 ? " open" : "", g + 1, html_escape(group_label(findings, group)),
                    group.records.size(), html_escape(span_of(group)));
    for (const auto& evidence : group.causes)
        out +=
            fmt::format("<li><span class=\"cause\">{}</span> {}</li>", cause_name(evidence.cause),
                        html_escape(describe(findings, group, evidence)));
    if (const auto* entry = findings.replay_of(group))
        out += fmt::format("<li><span class=\"ledger\">replay ledger</span> {}</li>",
                           html_escape(describe_replay(*entry)));
    if (auto verdicts = describe_verdicts(findings, group))
        out +=
            fmt::format("<li><span class=\"ledger\">verify</span> {}</li>", html_escape(*verdicts));
    for (const auto& line : describe_differences(findings, group))
        out += fmt::format("<li><span class=\"ledger\">differs</span> {}</li>", html_escape(line));
    out += "</ul><table><thead><tr><th>at</th><th>time</th><th>source</th><th>key</th>"
           "<th>payload</th></tr></thead><tbody>";
    for (auto index : group.records) {
        const auto& attempt = findings.attempts[index];
        out += fmt::format("<tr><td class=\"mono\">{}</td><td class=\"mono\">{}</td><td>{}</td>"
                           "<td class=\"mono\">{}</td><td class=\"mono\">{}</td></tr>",
                           html_escape(findings.position(index)),
                           attempt.time ? format_rfc3339(*attempt.time) : "-",
                           html_escape(findings.sources[attempt.source]),
                           html_escape(plain(findings.key(attempt.key))),
                           html_escape(Findings::payload_hex(attempt)));
    }
    return out + "</tbody></table></details>";
}

} // namespace

void render_html(GroupShelf& groups, const FindingsSummary& summary, std::string& out,
                 const std::function<void()>& flush) {
    append_offline_html_head(out, "idem audit", k_style, crypto::csp_hash(k_script));
    out += "<section id=\"summary\"><ul>";
    out += fmt::format("<li><b>{}</b> records, <b>{}</b> group{}, <b>{}</b> duplicates "
                       "({:.1f}%)</li>",
                       summary.records, summary.groups, summary.groups == 1 ? "" : "s",
                       summary.duplicates, summary.duplicate_ratio * 100);
    if (summary.groups == 0) {
        out += "<li>no record happened more than once</li></ul></section>";
    } else {
        auto worst = groups.at(summary.worst);
        out += fmt::format("<li>worst amplification: <b>{}</b> records for {}</li>",
                           worst.group.records.size(),
                           html_escape(group_label(worst.findings, worst.group)));
        for (const auto& [cause, count] : summary.causes)
            out += fmt::format("<li><span class=\"cause\">{}</span> {} group{}</li>",
                               cause_name(cause), count, count == 1 ? "" : "s");
        out += "</ul><p>Records per source: ";
        for (std::size_t i = 0; i < summary.sources.size(); ++i)
            out += fmt::format("{}{} {}", i ? ", " : "", html_escape(summary.sources[i].first),
                               summary.sources[i].second);
        out += "</p>";
        if (auto learned = describe_per_delivery(summary))
            out += "<p id=\"per-delivery\">" + html_escape(*learned) + "</p>";
        if (auto window = describe_intent_window(summary))
            out += "<p id=\"intent-window\">" + html_escape(*window) + "</p>";
        out += "</section>";
    }
    if (summary.what_if) {
        // --what-if and --suggest: the settings as a table, the delays as bars.
        const auto& what_if = *summary.what_if;
        out += "<section id=\"what-if\"><h2>What if the dedup key had lived longer?</h2>"
               "<table id=\"what-if-table\"><thead><tr><th>TTL</th><th>duplicates</th>"
               "<th>caught</th><th>missed</th><th>fingerprints held</th></tr></thead><tbody>";
        for (const auto& setting : what_if.settings)
            out += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                               format_duration(setting.ttl), setting.duplicates, setting.caught,
                               setting.missed, setting.held);
        for (const auto& suggestion : what_if.suggestions)
            out += fmt::format(
                "<tr class=\"suggested\"><td>{} (covers {:g}%)</td><td colspan=\"3\">"
                "suggested</td><td>{}</td></tr>",
                format_duration(suggestion.ttl), suggestion.coverage * 100, suggestion.held);
        out += "</tbody></table>";
        if (!what_if.keys.empty()) {
            out += "<h3>What if another key had been the idempotency key?</h3>"
                   "<table id=\"what-if-keys\"><thead><tr><th>key</th><th>duplicates</th>"
                   "<th>caught</th><th>missed</th><th>groups mixing payloads</th></tr></thead>"
                   "<tbody>";
            for (const auto& key : what_if.keys)
                out +=
                    fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                                html_escape(key.key), key.duplicates, key.caught, key.missed,
                                key.conflicting_groups);
            out += "</tbody></table>";
        }
        std::uint64_t most = 1;
        for (auto count : what_if.delays)
            most = std::max(most, count);
        constexpr int k_bar = 18, k_gap = 6, k_label = 70, k_width = 420;
        auto bars = what_if.delays.size();
        out +=
            fmt::format(R"(<svg id="delay-histogram" xmlns="http://www.w3.org/2000/svg" )"
                        R"(width="{}" height="{}" role="img" aria-label="delays of duplicates">)",
                        k_label + k_width + 60, static_cast<int>(bars) * (k_bar + k_gap));
        for (std::size_t b = 0; b < bars; ++b) {
            auto y = static_cast<int>(b) * (k_bar + k_gap);
            auto width =
                static_cast<double>(what_if.delays[b]) / static_cast<double>(most) * k_width;
            out += fmt::format(R"(<text x="0" y="{}">{}</text><rect x="{}" y="{}" width="{:.1f}" )"
                               R"(height="{}" fill="#4a7fc1"/><text x="{:.1f}" y="{}">{}</text>)",
                               y + 13, html_escape(k_delay_buckets[b]), k_label, y, width, k_bar,
                               k_label + width + 6, y + 13, what_if.delays[b]);
        }
        out += "</svg><p>Delays of duplicates after their key's first copy.</p></section>";
    }
    std::map<std::uint32_t, std::size_t> colours;
    std::vector<std::string> source_names;
    for (std::size_t g = 0; g < groups.size() && g < k_chart_groups; ++g) {
        auto [findings, group] = groups.at(g);
        source_names = findings.sources; // the same table for every group
        for (auto index : group.records)
            colours.try_emplace(findings.attempts[index].source, colours.size());
    }
    out += "<section id=\"timeline\"><h2>Attempts over time, top groups</h2>";
    out += timeline(groups, source_names, colours);
    out += "</section><section id=\"groups\"><h2>Groups</h2>"
           "<table id=\"groups-table\"><thead><tr><th data-type=\"number\">#</th>"
           "<th data-type=\"number\">records</th><th data-type=\"number\">span</th>"
           "<th>sources</th><th>causes</th><th>group</th></tr></thead><tbody>";
    for (std::size_t g = 0; g < groups.size(); ++g) {
        auto [findings, group] = groups.at(g);
        std::string sources;
        for (auto source : group.sources)
            sources += (sources.empty() ? "" : ", ") + findings.sources[source];
        auto span = group.first && group.last ? seconds(*group.last - *group.first) : 0.0;
        out += fmt::format("<tr><td class=\"n\">{}</td><td class=\"n\">{}</td>"
                           "<td class=\"n\" data-value=\"{}\">{}</td><td>{}</td><td>{}</td>"
                           "<td>{}</td></tr>",
                           g + 1, group.records.size(), span, html_escape(span_of(group)),
                           html_escape(sources), html_escape(cause_list(group)),
                           html_escape(group_label(findings, group)));
        flush();
    }
    out += "</tbody></table>";
    for (std::size_t g = 0; g < groups.size(); ++g) {
        auto [findings, group] = groups.at(g);
        out += group_details(findings, group, g);
        flush();
    }
    out += "</section><script>";
    out += k_script;
    out += "</script></body></html>\n";
}

} // namespace idem::audit
