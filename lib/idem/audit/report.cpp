// What `idem audit`'s reports share: the findings' accessors, the summary,
// and the renderer for each format (detail/report_out.hpp) chosen.

#include "idem/audit/report.hpp"

#include "idem/audit/detail/report_out.hpp"
#include "idem/audit/detail/wording.hpp"
#include "idem/record/annotate.hpp"

#include "idem/util/ordered_workers.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace idem::audit {

std::string Findings::position(std::size_t attempt) const {
    std::string out;
    append_position(out, attempt);
    return out;
}

// By hand, not fmt: reports write one per record.
void append_position(std::string& out, const std::vector<std::string>& inputs,
                     const RecordPosition& at) {
    out += inputs[at.input];
    out += at.row ? ":row " : ":";
    append_decimal(out, at.number);
}

void Findings::append_position(std::string& out, std::size_t attempt) const {
    audit::append_position(out, inputs, positions[attempt]);
}

std::string Findings::payload_hex(const Attempt& attempt) {
    std::string out;
    append_payload_hex(out, attempt);
    return out;
}

void Findings::append_payload_hex(std::string& out, const Attempt& attempt) {
    static constexpr char k_hex[] = "0123456789abcdef";
    auto bits = attempt.payload >> 16; // 48 bits, 12 digits
    char text[12];
    for (int i = 11; i >= 0; --i, bits >>= 4)
        text[i] = k_hex[bits & 0xf];
    out.append(text, sizeof text);
}

namespace {
const std::string k_none;
const std::string& text_of(const std::unordered_map<std::uint32_t, std::string>& texts,
                           std::uint32_t id) {
    auto found = texts.find(id);
    return found == texts.end() ? k_none : found->second;
}
} // namespace

const std::string& Findings::key(std::uint32_t id) const {
    return text_of(key_texts, id);
}

const std::string& Findings::fingerprint(std::uint32_t id) const {
    return text_of(fingerprint_texts, id);
}

const KeptVerdict* Findings::verdict_of(std::size_t attempt) const {
    if (!verdicts || verdicts->empty()) return nullptr;
    return verdict_at(position(attempt));
}

const std::vector<PayloadComparison>* Findings::differences_of(const Explanation& group) const {
    if (!differences || group.payloads < 2) return nullptr;
    return differences->of(group.kind == GroupKind::fingerprint, position(group.records.front()));
}

SignatureVerdict signature_verdict(const KeptVerdicts& verdicts,
                                   const std::vector<std::string>& inputs,
                                   const Findings::Position& position) {
    if (verdicts.empty()) return SignatureVerdict::unknown;
    std::string at;
    append_position(at, inputs, position);
    auto found = verdicts.find(at);
    return found == verdicts.end() ? SignatureVerdict::unknown
                                   : classify_verdict(found->second.valid, found->second.reason);
}

const KeptVerdict* Findings::verdict_at(const std::string& position) const {
    if (!verdicts) return nullptr;
    auto found = verdicts->find(position);
    return found == verdicts->end() ? nullptr : &found->second;
}

const store::ReplayEntry* Findings::replay_of(const Explanation& group) const {
    if (!replayed || group.kind != GroupKind::key) return nullptr;
    auto found = replayed->find(key(attempts[group.records.front()].key));
    return found == replayed->end() ? nullptr : &found->second;
}

FindingsSummary summarize(const Findings& findings) {
    FindingsSummary summary;
    summary.records = findings.records;
    summary.groups = findings.groups.size();
    // One intent per fingerprint (with --fingerprint), else per key.
    summary.duplicates = findings.identified - findings.intents;
    summary.duplicate_ratio = summary.records == 0 ? 0
                                                   : static_cast<double>(summary.duplicates) /
                                                         static_cast<double>(summary.records);
    std::unordered_map<std::uint32_t, std::uint64_t> by_source;
    std::vector<bool> counted(findings.attempts.size(), false);
    for (std::size_t g = 0; g < findings.groups.size(); ++g) {
        const auto& group = findings.groups[g];
        if (group.records.size() > findings.groups[summary.worst].records.size()) summary.worst = g;
        for (const auto& evidence : group.causes)
            ++summary.causes[evidence.cause];
        for (auto record : group.records)
            if (!counted[record]) {
                counted[record] = true;
                ++by_source[findings.attempts[record].source];
            }
    }
    for (const auto& [source, count] : by_source)
        summary.sources.emplace_back(
            findings.sources[source].empty() ? "(none)" : findings.sources[source], count);
    std::sort(summary.sources.begin(), summary.sources.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return summary;
}

namespace detail {

// Every group rendered in order. On several threads past a few hundred
// groups, a run of them per job, each thread reading the groups through
// its own reader: one thread rendering tens of thousands of groups takes
// longer than grouping a million records on every core.
void render_groups(GroupShelf& groups, ReportOut& report, std::size_t threads,
                   const RenderGroup& render) {
    constexpr std::size_t k_groups_per_job = 256;
    auto end = groups.size();
    if (threads <= 1 || end <= k_groups_per_job) {
        for (std::size_t g = 0; g < end; ++g) {
            auto [findings, group] = groups.at(g);
            render(findings, group, g, report.text());
            report.flush_when_large();
        }
        return;
    }
    std::vector<std::unique_ptr<GroupShelf>> readers;
    for (std::size_t i = 0; i < threads; ++i)
        readers.push_back(groups.reader());
    struct Job {
        std::size_t first, end;
    };
    OrderedWorkers<Job, std::string> pool(threads, 4 * threads, [&](Job& job, std::size_t worker) {
        std::string text;
        for (auto g = job.first; g < job.end; ++g) {
            auto [findings, group] = readers[worker]->at(g);
            render(findings, group, g, text);
        }
        return text;
    });
    for (std::size_t g = 0; g < end; g += k_groups_per_job) {
        while (pool.full())
            if (auto done = pool.next(true)) report.append(done->output);
        pool.submit({g, std::min(end, g + k_groups_per_job)});
    }
    while (auto done = pool.next(true))
        report.append(done->output);
}

} // namespace detail

namespace {

using namespace detail;

void render_into(GroupShelf& groups, const FindingsSummary& summary, ReportFormat format,
                 ReportOut& report, std::size_t threads, std::size_t width) {
    switch (format) {
    case ReportFormat::table:
        render_table(groups, summary, report, threads, width);
        return;
    case ReportFormat::json:
        render_json(groups, summary, report, threads);
        return;
    case ReportFormat::markdown:
        render_markdown(groups, summary, report, threads);
        return;
    case ReportFormat::html:
        render_html(groups, summary, report.text(), [&report] { report.flush_when_large(); });
        return;
    }
}

} // namespace

std::string render(const Findings& findings, const FindingsSummary& summary, ReportFormat format,
                   std::size_t table_width) {
    FindingsShelf groups(findings);
    ReportOut report(nullptr, format == ReportFormat::json);
    render_into(groups, summary, format, report, 1, table_width);
    return report.finish();
}

void write_report(GroupShelf& groups, const FindingsSummary& summary, ReportFormat format,
                  io::Sink& sink, std::size_t threads, std::size_t table_width) {
    ReportOut report(&sink, format == ReportFormat::json);
    render_into(groups, summary, format, report, threads, table_width);
    report.finish();
}

} // namespace idem::audit
