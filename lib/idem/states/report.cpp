#include "idem/states/report.hpp"
#include "idem/crypto/crypto.hpp"

#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <cmath>
#include <fmt/format.h>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

namespace idem::states {

namespace {

constexpr double k_pi = 3.14159265358979323846;

// Every state to draw: the machine's, then any the log showed beside them.
std::vector<std::string> all_states(const ReportData& data) {
    std::vector<std::string> states = data.machine->states;
    auto add = [&](const std::string& state) {
        if (std::find(states.begin(), states.end(), state) == states.end()) states.push_back(state);
    };
    for (const auto& [edge, counts] : data.observed.transitions) {
        add(edge.first);
        add(edge.second);
    }
    for (const auto& [state, count] : data.observed.first_states)
        add(state);
    return states;
}

struct Edge {
    std::string from, to;
    bool allowed = false;    // the machine declares it, for some operation
    TransitionCounts judged; // what the findings say of each time it was seen
    [[nodiscard]] std::uint64_t seen() const { return judged.total(); }
    // Seen, and judged anything but allowed: drawn red.
    [[nodiscard]] bool faulted() const { return seen() > judged[Verdict::allowed]; }
};

// "3", or "1 allowed, 1 illegal", "1 after-gap (not judged)": the counts
// by verdict, as the findings count them.
std::string judged_label(const Edge& edge) {
    if (!edge.faulted()) return std::to_string(edge.seen());
    std::vector<std::string> parts;
    for (std::size_t v = 0; v < k_verdicts; ++v)
        if (auto count = edge.judged.by_verdict[v])
            parts.push_back(
                fmt::format("{} {}{}", count, verdict_name(static_cast<Verdict>(v)),
                            static_cast<Verdict>(v) == Verdict::after_gap ? " (not judged)" : ""));
    return fmt::format("{}", fmt::join(parts, ", "));
}

// Allowed transitions and seen ones, each once.
std::vector<Edge> edges_of(const ReportData& data) {
    std::map<std::pair<std::string, std::string>, Edge> edges;
    for (const auto& transition : data.machine->transitions) {
        auto& edge = edges[{transition.from, transition.to}];
        edge.from = transition.from;
        edge.to = transition.to;
        edge.allowed = true;
    }
    for (const auto& [pair, counts] : data.observed.transitions) {
        auto& edge = edges[pair];
        edge.from = pair.first;
        edge.to = pair.second;
        edge.judged += counts;
    }
    std::vector<Edge> list;
    for (auto& [key, edge] : edges)
        list.push_back(std::move(edge));
    return list;
}

// The machine with the observed counts on its edges: allowed ones solid,
// forbidden ones the log showed red and dashed, states by kind.
void render_dot(const ReportData& data, std::string& out) {
    out += "digraph states {\n  rankdir=LR;\n  node [shape=ellipse, fontname=\"sans-serif\"];\n";
    for (const auto& state : all_states(data)) {
        std::string style;
        if (!data.machine->knows(state))
            style = ", style=dashed, color=red";
        else if (data.machine->is_final(state))
            style = ", shape=doublecircle";
        else if (data.machine->is_initial(state))
            style = ", style=bold";
        out += fmt::format("  {} [label={}{}];\n", dot_quoted(state), dot_quoted(state), style);
    }
    for (const auto& edge : edges_of(data)) {
        auto label = edge.seen() > 0 ? judged_label(edge) : std::string();
        auto style = !edge.allowed    ? ", color=red, style=dashed"
                     : edge.faulted() ? ", color=red"
                     : edge.seen()    ? ""
                                      : ", color=gray";
        out += fmt::format("  {} -> {} [label={}{}];\n", dot_quoted(edge.from), dot_quoted(edge.to),
                           dot_quoted(label), style);
    }
    out += "}\n";
}

std::string mermaid_id(const std::vector<std::string>& states, const std::string& state) {
    auto at = std::find(states.begin(), states.end(), state) - states.begin();
    return fmt::format("s{}", at);
}

void render_mermaid(const ReportData& data, std::string& out) {
    auto states = all_states(data);
    out += "stateDiagram-v2\n";
    for (const auto& state : states) {
        out += fmt::format("    {} : {}\n", mermaid_id(states, state), mermaid_label(state));
    }
    for (const auto& state : data.machine->initial)
        out += fmt::format("    [*] --> {}\n", mermaid_id(states, state));
    for (const auto& state : data.machine->final)
        out += fmt::format("    {} --> [*]\n", mermaid_id(states, state));
    for (const auto& edge : edges_of(data)) {
        auto label = judged_label(edge);
        if (!edge.allowed) label += " NOT IN THE MACHINE";
        out += fmt::format("    {} --> {} : {}\n", mermaid_id(states, edge.from),
                           mermaid_id(states, edge.to), label);
    }
}

// The machine drawn as SVG, states on a circle: what people would rather
// look at than read. No script, no fetch.
std::string svg_of(const ReportData& data) {
    auto states = all_states(data);
    const double width = 720, height = 520, cx = width / 2, cy = height / 2;
    const double radius = std::min(cx, cy) - 70;
    std::map<std::string, std::pair<double, double>> at;
    for (std::size_t i = 0; i < states.size(); ++i) {
        double angle =
            2 * k_pi * static_cast<double>(i) / static_cast<double>(states.size()) - k_pi / 2;
        at[states[i]] = {cx + radius * std::cos(angle), cy + radius * std::sin(angle)};
    }
    std::string out = fmt::format(
        "<svg id=\"machine-drawing\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
        "height=\"{1}\" viewBox=\"0 0 {0} {1}\"><defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" "
        "refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\">"
        "<path d=\"M 0 0 L 10 5 L 0 10 z\" fill=\"#555\"/></marker></defs>",
        width, height);
    const double node = 34;
    for (const auto& edge : edges_of(data)) {
        auto [x1, y1] = at[edge.from];
        auto [x2, y2] = at[edge.to];
        auto colour = !edge.allowed || edge.faulted() ? "#d62728" : edge.seen() ? "#333" : "#bbb";
        auto dash = edge.allowed ? "" : " stroke-dasharray=\"6 4\"";
        auto css = edge.allowed ? "edge allowed" : "edge forbidden";
        if (edge.from == edge.to) {
            out += fmt::format(
                "<circle class=\"{}\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"16\" fill=\"none\" "
                "stroke=\"{}\"{}/>",
                css, x1, y1 - node - 10, colour, dash);
            if (edge.seen() > 0)
                out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\">{}</text>", x1 + 18,
                                   y1 - node - 22, judged_label(edge));
            continue;
        }
        double dx = x2 - x1, dy = y2 - y1, length = std::max(1.0, std::hypot(dx, dy));
        // Bent a little, so that a -> b and b -> a do not overlap.
        double bend = 24, mx = (x1 + x2) / 2 - dy / length * bend,
               my = (y1 + y2) / 2 + dx / length * bend;
        double sx = x1 + dx / length * node, sy = y1 + dy / length * node;
        double ex = x2 - dx / length * node, ey = y2 - dy / length * node;
        out += fmt::format("<path class=\"{}\" d=\"M {:.1f} {:.1f} Q {:.1f} {:.1f} {:.1f} {:.1f}\" "
                           "fill=\"none\" stroke=\"{}\" stroke-width=\"{}\"{} "
                           "marker-end=\"url(#arrow)\"/>",
                           css, sx, sy, mx, my, ex, ey, colour, edge.seen() ? 2 : 1, dash);
        if (edge.seen() > 0 || !edge.allowed)
            out += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\">{}</text>", mx, my,
                               colour, judged_label(edge));
    }
    for (const auto& state : states) {
        auto [x, y] = at[state];
        auto fill = !data.machine->knows(state)       ? "#fde0e0"
                    : data.machine->is_final(state)   ? "#e3f2e3"
                    : data.machine->is_initial(state) ? "#e3ecfa"
                                                      : "#f4f4f4";
        out +=
            fmt::format("<circle class=\"state\" cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{}\" fill=\"{}\" "
                        "stroke=\"#555\"/><text x=\"{:.1f}\" y=\"{:.1f}\" "
                        "text-anchor=\"middle\">{}</text>",
                        x, y, node, fill, x, y + 4, html_escape(state));
    }
    return out + "</svg>";
}

nlohmann::ordered_json json_of(const ReportData& data) {
    nlohmann::ordered_json json;
    json["events"] = data.events;
    json["entities"] = data.entities;
    json["rejected"] = data.rejected;
    auto& findings = json["findings"] = nlohmann::ordered_json::object();
    for (std::size_t i = 0; i < k_finding_kinds; ++i)
        findings[std::string(finding_name(static_cast<Finding>(i)))] = data.counts[i];
    auto& matrix = json["transitions"] = nlohmann::ordered_json::array();
    for (const auto& edge : edges_of(data)) {
        auto judged = nlohmann::ordered_json::object();
        for (std::size_t v = 0; v < k_verdicts; ++v)
            if (auto count = edge.judged.by_verdict[v])
                judged[std::string(verdict_name(static_cast<Verdict>(v)))] = count;
        matrix.push_back({{"from", edge.from},
                          {"to", edge.to},
                          {"allowed", edge.allowed},
                          {"seen", edge.seen()},
                          {"judged", std::move(judged)}});
    }
    auto& worst = json["worst"] = nlohmann::ordered_json::array();
    for (const auto& entity : data.worst) {
        nlohmann::ordered_json item;
        item["entity"] = entity.entity;
        item["state"] = entity.state;
        item["findings"] = entity.findings;
        auto& evidence = item["evidence"] = nlohmann::ordered_json::array();
        for (const auto& e : entity.evidence)
            evidence.push_back({{"finding", finding_name(e.finding)},
                                {"from", e.from},
                                {"to", e.to},
                                {"at", e.position},
                                {"why", e.detail}});
        if (entity.evidence_more > 0) item["evidence_more"] = entity.evidence_more;
        worst.push_back(std::move(item));
    }
    return json;
}

void render_text(const ReportData& data, std::string& out, bool markdown) {
    std::uint64_t total = 0;
    for (auto count : data.counts)
        total += count;
    // Every value from the log passes through the medium's function
    // (text_report_value): no control, C1 or bidi character, no line break,
    // and in Markdown no raw HTML, no cell or code span a value closes.
    auto text = [markdown](std::string_view value) { return text_report_value(value, markdown); };
    out += markdown ? "# idem states\n\n" : "idem states\n\n";
    out += fmt::format("{} events of {} entities, {} finding{}{}\n\n", data.events, data.entities,
                       total, total == 1 ? "" : "s",
                       data.rejected ? fmt::format(", {} records rejected", data.rejected)
                                     : std::string());
    if (markdown) out += "| finding | count |\n|---|---|\n";
    for (std::size_t i = 0; i < k_finding_kinds; ++i) {
        if (data.counts[i] == 0) continue;
        auto name = finding_name(static_cast<Finding>(i));
        out += markdown ? fmt::format("| {} | {} |\n", name, data.counts[i])
                        : fmt::format("  {:<18} {}\n", name, data.counts[i]);
    }
    out += markdown ? "\n## Transitions\n\n| from | to | seen | judged | in the machine |\n"
                      "|---|---|---|---|---|\n"
                    : "\ntransitions (seen, as the findings judged them)\n";
    for (const auto& edge : edges_of(data)) {
        auto from = text(edge.from), to = text(edge.to);
        auto judged = edge.seen() == 0 ? std::string("-") : judged_label(edge);
        out += markdown ? fmt::format("| {} | {} | {} | {} | {} |\n", from, to, edge.seen(),
                                      edge.faulted() ? "**" + judged + "**" : judged,
                                      edge.allowed ? "yes" : "**no**")
                        : fmt::format("  {:<16} -> {:<16} {:>8}{}{}\n", from, to, edge.seen(),
                                      edge.faulted() ? "  " + judged : std::string(),
                                      edge.allowed ? "" : "  (not in the machine)");
    }
    if (data.worst.empty()) return;
    out += markdown ? "\n## Worst entities\n" : "\nworst entities\n";
    for (const auto& worst : data.worst) {
        auto entity = worst;
        entity.entity = text(worst.entity);
        entity.state = text(worst.state);
        out += markdown
                   ? fmt::format("\n### {} ({} finding{}, now {})\n\n", entity.entity,
                                 entity.findings, entity.findings == 1 ? "" : "s", entity.state)
                   : fmt::format("\n  {}: {} finding{}, now {}\n", entity.entity, entity.findings,
                                 entity.findings == 1 ? "" : "s", entity.state);
        for (const auto& e : entity.evidence) {
            auto from = e.from.empty() ? std::string("-") : text(e.from);
            auto to = e.to.empty() ? std::string("-") : text(e.to);
            auto at = e.position.empty() ? std::string("-") : text(e.position);
            auto detail = text(e.detail);
            if (markdown)
                out += fmt::format("- `{}` {} → {} at {}: {}\n", finding_name(e.finding), from, to,
                                   at, detail);
            else
                out += fmt::format("    {:<17} {} -> {} at {}: {}\n", finding_name(e.finding), from,
                                   to, at, detail);
        }
        if (entity.evidence_more > 0)
            out += markdown ? fmt::format("- and {} more\n", entity.evidence_more)
                            : fmt::format("    and {} more\n", entity.evidence_more);
    }
}

void render_html(const ReportData& data, std::string& out) {
    append_offline_html_head(
        out, "idem states",
        "body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1000px;"
        "color:#222}table{border-collapse:collapse;margin:.5em 0}th,td{border-bottom:1px solid "
        "#ddd;padding:.3em .6em;text-align:left}td.n{text-align:right}.no{color:#d62728;"
        "font-weight:600}svg text{font:12px system-ui,sans-serif}",
        crypto::csp_hash(k_ready_script));
    std::uint64_t total = 0;
    for (auto count : data.counts)
        total += count;
    out += fmt::format("<p><b>{}</b> events of <b>{}</b> entities, <b>{}</b> finding{}.</p>",
                       data.events, data.entities, total, total == 1 ? "" : "s");
    out += "<table "
           "id=\"findings-table\"><thead><tr><th>finding</th><th>count</th></tr></thead><tbody>";
    for (std::size_t i = 0; i < k_finding_kinds; ++i)
        out += fmt::format("<tr><td>{}</td><td class=\"n\">{}</td></tr>",
                           finding_name(static_cast<Finding>(i)), data.counts[i]);
    out += "</tbody></table><h2>The machine, with what the log did</h2>";
    out += svg_of(data);
    out += "<table id=\"transitions-table\"><thead><tr><th>from</th><th>to</th><th>seen</th>"
           "<th>judged</th><th>in the machine</th></tr></thead><tbody>";
    for (const auto& edge : edges_of(data))
        out += fmt::format("<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td{}>{}</td>"
                           "<td{}>{}</td></tr>",
                           html_escape(edge.from), html_escape(edge.to), edge.seen(),
                           edge.faulted() ? " class=\"no\"" : "",
                           edge.seen() ? judged_label(edge) : "-",
                           edge.allowed ? "" : " class=\"no\"", edge.allowed ? "yes" : "no");
    out += "</tbody></table>";
    if (!data.worst.empty()) {
        out += "<h2>Worst entities</h2>";
        for (const auto& entity : data.worst) {
            out += fmt::format(
                "<details class=\"entity\"><summary>{} — {} finding{}, now {}</summary><ol>",
                html_escape(entity.entity), entity.findings, entity.findings == 1 ? "" : "s",
                html_escape(entity.state));
            for (const auto& e : entity.evidence)
                out +=
                    fmt::format("<li><b>{}</b> {} → {} <code>{}</code>: {}</li>",
                                finding_name(e.finding), html_escape(e.from.empty() ? "-" : e.from),
                                html_escape(e.to.empty() ? "-" : e.to), html_escape(e.position),
                                html_escape(e.detail));
            if (entity.evidence_more > 0)
                out += fmt::format("<li>and {} more</li>", entity.evidence_more);
            out += "</ol></details>";
        }
    }
    out += "<script>";
    out += k_ready_script;
    out += "</script></body></html>\n";
}

} // namespace

void render_report(const ReportData& data, ReportFormat format, std::string& out) {
    switch (format) {
    case ReportFormat::dot:
        render_dot(data, out);
        return;
    case ReportFormat::mermaid:
        render_mermaid(data, out);
        return;
    case ReportFormat::json:
        out += json_report_text(json_of(data).dump(2));
        out += '\n';
        return;
    case ReportFormat::markdown:
        render_text(data, out, true);
        return;
    case ReportFormat::html:
        render_html(data, out);
        return;
    case ReportFormat::table:
    case ReportFormat::none:
        render_text(data, out, false);
        return;
    }
}

} // namespace idem::states
