// What `idem reconcile` reports (docs/reconcile.md): the funnel of stages,
// each hop's losses and latency, duplicates per stage, and examples.

#include "idem/crypto/crypto.hpp"
#include "idem/reconcile/run.hpp"

#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::reconcile {

namespace {

// A latency as a person reads it: "340 ms" under a second, "14m58s" past
// one (898000 ms says nothing at a glance).
std::string ms(const std::optional<double>& value) {
    if (!value) return "-";
    if (*value < 1000) return fmt::format("{:.0f} ms", *value);
    return format_duration(std::chrono::milliseconds(static_cast<std::int64_t>(*value)));
}

nlohmann::ordered_json json_of(const Reconciliation& r) {
    nlohmann::ordered_json json;
    json["keys"] = r.keys;
    if (r.carried) json["carried"] = {{"in", r.carried_in}, {"out", r.carry.size()}};
    auto& stages = json["stages"] = nlohmann::ordered_json::array();
    for (const auto& stage : r.stages)
        stages.push_back({{"stage", stage.name},
                          {"records", stage.records},
                          {"keys", stage.keys},
                          {"duplicated_keys", stage.duplicated_keys},
                          {"extra_copies", stage.extra_copies},
                          {"carried_copies", stage.carried_copies},
                          {"duplicate_ratio", stage.duplicate_ratio},
                          {"orphans", stage.orphans}});
    auto& hops = json["hops"] = nlohmann::ordered_json::array();
    for (const auto& hop : r.hops) {
        nlohmann::ordered_json item{{"from", hop.from},           {"to", hop.to},
                                    {"keys", hop.keys},           {"reached", hop.reached},
                                    {"lost", hop.lost},           {"pending", hop.pending},
                                    {"loss_rate", hop.loss_rate}, {"late", hop.late},
                                    {"changed", hop.changed},     {"amplified", hop.amplified}};
        auto& histogram = item["latency_histogram"] = nlohmann::ordered_json::object();
        for (std::size_t b = 0; b < hop.latency_histogram.size(); ++b)
            histogram[k_latency_buckets[b]] = hop.latency_histogram[b];
        auto& latency = item["latency_ms"] = nlohmann::ordered_json::object();
        latency["p50"] = hop.p50_ms ? nlohmann::ordered_json(*hop.p50_ms) : nullptr;
        latency["p95"] = hop.p95_ms ? nlohmann::ordered_json(*hop.p95_ms) : nullptr;
        latency["p99"] = hop.p99_ms ? nlohmann::ordered_json(*hop.p99_ms) : nullptr;
        item["lost_by_hour"] = hop.lost_by_hour;
        // When did the loss happen: per hour with losses, the keys that
        // started the hop then and the share of them lost.
        auto& by_hour = item["loss_by_hour"] = nlohmann::ordered_json::array();
        for (const auto& [hour, lost] : hop.lost_by_hour) {
            auto keys = hop.keys_by_hour.count(hour) ? hop.keys_by_hour.at(hour) : 0;
            by_hour.push_back(
                {{"hour", hour + ":00"},
                 {"keys", keys},
                 {"lost", lost},
                 {"loss_rate",
                  keys == 0 ? 0.0 : static_cast<double>(lost) / static_cast<double>(keys)}});
        }
        if (!hop.by_group.empty()) {
            auto& groups = item["by_group"] = nlohmann::ordered_json::array();
            for (const auto& group : hop.by_group)
                groups.push_back(
                    {{"group", group.name}, {"keys", group.keys}, {"lost", group.lost}});
        }
        hops.push_back(std::move(item));
    }
    if (!r.services.empty()) {
        auto& services = json["services"] = nlohmann::ordered_json::array();
        for (const auto& service : r.services)
            services.push_back({{"service", service.service},
                                {"expected", service.expected},
                                {"missing", service.missing},
                                {"missing_span_ratio", service.missing_ratio}});
    }
    auto& findings = json["findings"] = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < k_finding_kinds; ++i) {
        nlohmann::ordered_json item{{"count", r.counts[i]}};
        auto& examples = item["examples"] = nlohmann::ordered_json::array();
        for (const auto& example : r.examples[i])
            examples.push_back(
                {{"key", example.key}, {"stage", example.stage}, {"why", example.detail}});
        findings[std::string(finding_name(static_cast<Finding>(i)))] = std::move(item);
    }
    return json;
}

void render_text(const Reconciliation& r, std::string& out, bool markdown) {
    // Every value from the logs or the flags (stages, --by groups, keys,
    // services) passes through the medium's function (text_report_value):
    // no control, C1 or bidi character, no line break, and in Markdown no
    // raw HTML, no cell or heading a value makes.
    auto text = [markdown](std::string_view value) { return text_report_value(value, markdown); };
    out += markdown ? "# idem reconcile\n\n" : "idem reconcile\n\n";
    out += fmt::format("{} keys over {} stages\n", r.keys, r.stages.size());
    if (r.carried)
        out += fmt::format("{} keys still pending came from the previous run; {} are kept for "
                           "the next\n",
                           r.carried_in, r.carry.size());
    out += '\n';
    out += markdown ? "| stage | records | keys | duplicated keys | duplicate ratio | carried "
                      "copies | orphans |\n|---|---|---|---|---|---|---|\n"
                    : "stages\n";
    for (const auto& stage : r.stages)
        out += markdown
                   ? fmt::format("| {} | {} | {} | {} | {:.3f}% | {} | {} |\n", text(stage.name),
                                 stage.records, stage.keys, stage.duplicated_keys,
                                 stage.duplicate_ratio * 100, stage.carried_copies, stage.orphans)
                   : fmt::format("  {:<14} {:>9} records {:>9} keys {:>7} duplicated "
                                 "({:.3f}%) {:>7} carried {:>7} orphans\n",
                                 text(stage.name), stage.records, stage.keys, stage.duplicated_keys,
                                 stage.duplicate_ratio * 100, stage.carried_copies, stage.orphans);
    out += markdown ? "\n| hop | keys | reached | lost | pending | loss rate | late | changed | "
                      "p50 | p95 | p99 |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
                    : "\nhops\n";
    for (const auto& hop : r.hops)
        out += markdown
                   ? fmt::format(
                         "| {} → {} | {} | {} | {} | {} | {:.4f}% | {} | {} | {} | {} | {} |\n",
                         text(hop.from), text(hop.to), hop.keys, hop.reached, hop.lost, hop.pending,
                         hop.loss_rate * 100, hop.late, hop.changed, ms(hop.p50_ms), ms(hop.p95_ms),
                         ms(hop.p99_ms))
                   : fmt::format("  {} -> {}: {} keys, {} reached, {} lost ({:.4f}%), {} pending, "
                                 "{} late, {} changed; latency p50 {} p95 {} p99 {}\n",
                                 text(hop.from), text(hop.to), hop.keys, hop.reached, hop.lost,
                                 hop.loss_rate * 100, hop.pending, hop.late, hop.changed,
                                 ms(hop.p50_ms), ms(hop.p95_ms), ms(hop.p99_ms));
    if (!r.services.empty()) {
        out += markdown ? "\n| service | spans expected | missing | missing-span ratio |\n"
                          "|---|---|---|---|\n"
                        : "\nmissing spans per service\n";
        for (const auto& service : r.services)
            out += markdown
                       ? fmt::format("| {} | {} | {} | {:.3f}% |\n", text(service.service),
                                     service.expected, service.missing, service.missing_ratio * 100)
                       : fmt::format("  {:<24} {} of {} traces lack its span ({:.3f}%)\n",
                                     text(service.service), service.missing, service.expected,
                                     service.missing_ratio * 100);
    }
    for (const auto& hop : r.hops) {
        if (hop.by_group.empty()) continue;
        out += markdown ? fmt::format("\n## Lost {} → {}, by group\n\n| group | keys | lost |\n"
                                      "|---|---|---|\n",
                                      text(hop.from), text(hop.to))
                        : fmt::format("\nlost {} -> {}, by group\n", text(hop.from), text(hop.to));
        for (const auto& group : hop.by_group) {
            auto name = text(group.name);
            out += markdown ? fmt::format("| {} | {} | {} |\n", name, group.keys, group.lost)
                            : fmt::format("  {:<24} {:>8} of {:>8} keys\n", name, group.lost,
                                          group.keys);
        }
    }
    for (const auto& hop : r.hops) {
        if (hop.lost_by_hour.empty()) continue;
        out += markdown ? fmt::format("\n## Lost {} → {}, by hour\n\n| hour | lost | of keys | "
                                      "loss rate |\n|---|---|---|---|\n",
                                      text(hop.from), text(hop.to))
                        : fmt::format("\nlost {} -> {}, by hour\n", text(hop.from), text(hop.to));
        for (const auto& [hour, lost] : hop.lost_by_hour) {
            auto keys = hop.keys_by_hour.count(hour) ? hop.keys_by_hour.at(hour) : 0;
            auto rate =
                keys == 0 ? 0.0 : static_cast<double>(lost) / static_cast<double>(keys) * 100;
            out += markdown ? fmt::format("| {}:00 | {} | {} | {:.3f}% |\n", hour, lost, keys, rate)
                            : fmt::format("  {}:00  {:>7} of {:>8} keys ({:.3f}%)\n", hour, lost,
                                          keys, rate);
        }
    }
    for (std::size_t i = 0; i < k_finding_kinds; ++i) {
        if (r.counts[i] == 0) continue;
        auto name = finding_name(static_cast<Finding>(i));
        out += markdown ? fmt::format("\n## {} ({})\n\n", name, r.counts[i])
                        : fmt::format("\n{} ({}), for example\n", name, r.counts[i]);
        for (const auto& example : r.examples[i]) {
            auto key = text(example.key), detail = text(example.detail);
            out += markdown ? fmt::format("- {}: {}\n", key, detail)
                            : fmt::format("  {}: {}\n", key, detail);
        }
    }
}

// The funnel: one bar per stage, as wide as its keys, and what each hop
// lost; then each hop's latency histogram. SVG drawn here: the page loads
// nothing (a Content-Security-Policy forbids it), as audit's and states' do.
void render_html(const Reconciliation& r, std::string& out) {
    append_offline_html_head(
        out, "idem reconcile",
        "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;"
        "color:#222}table{border-collapse:collapse;margin:.5em 0}th,td{border-bottom:1px solid "
        "#ddd;padding:.3em .6em;text-align:left}td.n{text-align:right}svg text{font:12px "
        "system-ui,sans-serif}",
        crypto::csp_hash(k_ready_script));
    out += fmt::format("<p><b>{}</b> keys over <b>{}</b> stages.</p><h2>Funnel</h2>", r.keys,
                       r.stages.size());
    std::uint64_t widest = 1;
    for (const auto& stage : r.stages)
        widest = std::max(widest, stage.keys);
    const double width = 640, bar = 28, gap = 34;
    out += fmt::format("<svg id=\"funnel\" xmlns=\"http://www.w3.org/2000/svg\" width=\"900\" "
                       "height=\"{:.0f}\">",
                       static_cast<double>(r.stages.size()) * (bar + gap) + 10);
    for (std::size_t s = 0; s < r.stages.size(); ++s) {
        const auto& stage = r.stages[s];
        double w = width * static_cast<double>(stage.keys) / static_cast<double>(widest);
        double y = static_cast<double>(s) * (bar + gap) + 5;
        out += fmt::format("<rect class=\"stage\" x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" "
                           "height=\"{}\" fill=\"#4a7fc1\"/><text x=\"{:.1f}\" y=\"{:.1f}\">{}: "
                           "{} keys, {} records</text>",
                           (width - w) / 2, y, w, bar, width + 10, y + 18, html_escape(stage.name),
                           stage.keys, stage.records);
        if (s < r.hops.size()) {
            const auto& hop = r.hops[s];
            out += fmt::format("<text class=\"hop\" x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">"
                               "&#8595; {} lost ({:.3f}%), {} pending</text>",
                               width / 2 - 80, y + bar + 22, hop.lost ? "#d62728" : "#555",
                               hop.lost, hop.loss_rate * 100, hop.pending);
        }
    }
    out += "</svg><table id=\"hops-table\"><thead><tr><th>hop</th><th>keys</th><th>reached"
           "</th><th>lost</th><th>loss rate</th><th>late</th><th>changed</th><th>p50</th>"
           "<th>p95</th><th>p99</th></tr></thead><tbody>";
    for (const auto& hop : r.hops)
        out += fmt::format("<tr><td>{} &#8594; {}</td><td class=\"n\">{}</td><td class=\"n\">{}"
                           "</td><td class=\"n\">{}</td><td class=\"n\">{:.4f}%</td><td "
                           "class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td>"
                           "<td>{}</td></tr>",
                           html_escape(hop.from), html_escape(hop.to), hop.keys, hop.reached,
                           hop.lost, hop.loss_rate * 100, hop.late, hop.changed, ms(hop.p50_ms),
                           ms(hop.p95_ms), ms(hop.p99_ms));
    out += "</tbody></table><h2>Latency per hop</h2>";
    for (const auto& hop : r.hops) {
        std::uint64_t most = 1;
        for (auto count : hop.latency_histogram)
            most = std::max(most, count);
        out += fmt::format("<h3>{} &#8594; {}</h3><svg class=\"histogram\" "
                           "xmlns=\"http://www.w3.org/2000/svg\" width=\"720\" height=\"170\">",
                           html_escape(hop.from), html_escape(hop.to));
        for (std::size_t b = 0; b < hop.latency_histogram.size(); ++b) {
            auto count = hop.latency_histogram[b];
            double height = 120.0 * static_cast<double>(count) / static_cast<double>(most);
            double x = 20 + static_cast<double>(b) * 85;
            out += fmt::format("<rect class=\"bucket\" x=\"{:.0f}\" y=\"{:.1f}\" width=\"70\" "
                               "height=\"{:.1f}\" fill=\"#2ca02c\"/><text x=\"{:.0f}\" y=\"155\">"
                               "{}</text><text x=\"{:.0f}\" y=\"{:.1f}\">{}</text>",
                               x, 130 - height, height, x, html_escape(k_latency_buckets[b]), x,
                               126 - height, count);
        }
        out += "</svg>";
    }
    out += "<h2>Findings</h2><ul>";
    for (std::size_t i = 0; i < k_finding_kinds; ++i) {
        out += fmt::format("<li><b>{}</b> {}", finding_name(static_cast<Finding>(i)), r.counts[i]);
        if (!r.examples[i].empty()) {
            out += "<ul>";
            for (const auto& example : r.examples[i])
                out += fmt::format("<li><code>{}</code>: {}</li>", html_escape(example.key),
                                   html_escape(example.detail));
            out += "</ul>";
        }
        out += "</li>";
    }
    out += "</ul><script>";
    out += k_ready_script;
    out += "</script></body></html>\n";
}

} // namespace

void render_report(const Reconciliation& reconciliation, ReportFormat format, std::string& out) {
    switch (format) {
    case ReportFormat::json:
        out += json_report_text(json_of(reconciliation).dump(2));
        out += '\n';
        return;
    case ReportFormat::markdown:
        render_text(reconciliation, out, true);
        return;
    case ReportFormat::table:
        render_text(reconciliation, out, false);
        return;
    case ReportFormat::html:
        render_html(reconciliation, out);
        return;
    }
}

} // namespace idem::reconcile
