// What `idem reconcile` reports (docs/reconcile.md): the funnel of stages,
// each hop's losses and latency, duplicates per stage, and examples.

#include "idem/reconcile/run.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace idem::reconcile {

namespace {

std::string ms(const std::optional<double>& value) {
    return value ? fmt::format("{:.0f} ms", *value) : std::string("-");
}

nlohmann::ordered_json json_of(const Reconciliation& r) {
    nlohmann::ordered_json json;
    json["keys"] = r.keys;
    auto& stages = json["stages"] = nlohmann::ordered_json::array();
    for (const auto& stage : r.stages)
        stages.push_back({{"stage", stage.name},
                          {"records", stage.records},
                          {"keys", stage.keys},
                          {"duplicated_keys", stage.duplicated_keys},
                          {"extra_copies", stage.extra_copies},
                          {"duplicate_ratio", stage.duplicate_ratio},
                          {"orphans", stage.orphans}});
    auto& hops = json["hops"] = nlohmann::ordered_json::array();
    for (const auto& hop : r.hops) {
        nlohmann::ordered_json item{{"from", hop.from},           {"to", hop.to},
                                    {"keys", hop.keys},           {"reached", hop.reached},
                                    {"lost", hop.lost},           {"pending", hop.pending},
                                    {"loss_rate", hop.loss_rate}, {"late", hop.late},
                                    {"changed", hop.changed},     {"amplified", hop.amplified}};
        auto& latency = item["latency_ms"] = nlohmann::ordered_json::object();
        latency["p50"] = hop.p50_ms ? nlohmann::ordered_json(*hop.p50_ms) : nullptr;
        latency["p95"] = hop.p95_ms ? nlohmann::ordered_json(*hop.p95_ms) : nullptr;
        latency["p99"] = hop.p99_ms ? nlohmann::ordered_json(*hop.p99_ms) : nullptr;
        item["lost_by_hour"] = hop.lost_by_hour;
        hops.push_back(std::move(item));
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
    out += markdown ? "# idem reconcile\n\n" : "idem reconcile\n\n";
    out += fmt::format("{} keys over {} stages\n\n", r.keys, r.stages.size());
    out += markdown ? "| stage | records | keys | duplicated keys | duplicate ratio | orphans |\n"
                      "|---|---|---|---|---|---|\n"
                    : "stages\n";
    for (const auto& stage : r.stages)
        out += markdown ? fmt::format("| {} | {} | {} | {} | {:.3f}% | {} |\n", stage.name,
                                      stage.records, stage.keys, stage.duplicated_keys,
                                      stage.duplicate_ratio * 100, stage.orphans)
                        : fmt::format("  {:<14} {:>9} records {:>9} keys {:>7} duplicated "
                                      "({:.3f}%) {:>7} orphans\n",
                                      stage.name, stage.records, stage.keys, stage.duplicated_keys,
                                      stage.duplicate_ratio * 100, stage.orphans);
    out += markdown ? "\n| hop | keys | reached | lost | pending | loss rate | late | changed | "
                      "p50 | p95 | p99 |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
                    : "\nhops\n";
    for (const auto& hop : r.hops)
        out += markdown
                   ? fmt::format(
                         "| {} → {} | {} | {} | {} | {} | {:.4f}% | {} | {} | {} | {} | {} |\n",
                         hop.from, hop.to, hop.keys, hop.reached, hop.lost, hop.pending,
                         hop.loss_rate * 100, hop.late, hop.changed, ms(hop.p50_ms), ms(hop.p95_ms),
                         ms(hop.p99_ms))
                   : fmt::format("  {} -> {}: {} keys, {} reached, {} lost ({:.4f}%), {} pending, "
                                 "{} late, {} changed; latency p50 {} p95 {} p99 {}\n",
                                 hop.from, hop.to, hop.keys, hop.reached, hop.lost,
                                 hop.loss_rate * 100, hop.pending, hop.late, hop.changed,
                                 ms(hop.p50_ms), ms(hop.p95_ms), ms(hop.p99_ms));
    for (const auto& hop : r.hops) {
        if (hop.lost_by_hour.empty()) continue;
        out += markdown ? fmt::format("\n## Lost {} → {}, by hour\n\n| hour | lost |\n|---|---|\n",
                                      hop.from, hop.to)
                        : fmt::format("\nlost {} -> {}, by hour\n", hop.from, hop.to);
        for (const auto& [hour, lost] : hop.lost_by_hour)
            out += markdown ? fmt::format("| {}:00 | {} |\n", hour, lost)
                            : fmt::format("  {}:00  {}\n", hour, lost);
    }
    for (std::size_t i = 0; i < k_finding_kinds; ++i) {
        if (r.counts[i] == 0) continue;
        auto name = finding_name(static_cast<Finding>(i));
        out += markdown ? fmt::format("\n## {} ({})\n\n", name, r.counts[i])
                        : fmt::format("\n{} ({}), for example\n", name, r.counts[i]);
        for (const auto& example : r.examples[i])
            out += markdown ? fmt::format("- `{}`: {}\n", example.key, example.detail)
                            : fmt::format("  {}: {}\n", example.key, example.detail);
    }
}

} // namespace

void render_report(const Reconciliation& reconciliation, ReportFormat format, std::string& out) {
    switch (format) {
    case ReportFormat::json:
        out += json_of(reconciliation).dump(2);
        out += '\n';
        return;
    case ReportFormat::markdown:
        render_text(reconciliation, out, true);
        return;
    case ReportFormat::table:
        render_text(reconciliation, out, false);
        return;
    }
}

} // namespace idem::reconcile
