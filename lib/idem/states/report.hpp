#pragma once
// What `idem states --report` and `--format dot|mermaid` show (docs/states.md):
// counts per finding, the worst entities with their findings in order, and
// the observed transitions beside the allowed ones.

#include "idem/states/checker.hpp"
#include "idem/states/machine.hpp"
#include "idem/states/run.hpp"

#include <array>
#include <string>
#include <vector>

namespace idem::states {

// One finding as evidence: where, what changed, and why.
struct Evidence {
    std::string position; // "file:line" ("" for a gap or stuck)
    std::string from, to;
    Finding finding = Finding::illegal;
    std::string detail;
};

struct WorstEntity {
    std::string entity;
    std::string state; // where it ended
    std::uint64_t findings = 0;
    std::vector<Evidence> evidence; // the first ones, in order
    std::uint64_t evidence_more = 0;
};

struct ReportData {
    const Machine* machine = nullptr;
    Observed observed;
    std::array<std::uint64_t, k_finding_kinds> counts{};
    std::uint64_t events = 0, entities = 0, rejected = 0;
    std::vector<WorstEntity> worst;
};

// `format` one of table, json, markdown, html, dot, mermaid.
void render_report(const ReportData& data, ReportFormat format, std::string& out);

} // namespace idem::states
