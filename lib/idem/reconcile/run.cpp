// idem reconcile over its stages (docs/reconcile.md). run_reconcile reads
// as the run's steps; each is a named function below it.

#include "idem/reconcile/run.hpp"

#include "idem/reconcile/detail/pending_store.hpp"
#include "idem/reconcile/detail/stage_reader.hpp"
#include "idem/reconcile/detail/traces.hpp"
#include "idem/reconcile/spill.hpp"
#include "idem/record/parser.hpp"
#include "idem/record/path_census.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <set>
#include <unordered_set>

namespace idem::reconcile {

namespace {

using detail::PendingStore;
using detail::StageReader;

LedgerOptions ledger_options_of(const ReconcileRunOptions& options) {
    LedgerOptions ledger_options;
    for (const auto& stage : options.stages)
        ledger_options.stages.push_back(stage.name);
    ledger_options.grace = options.grace;
    ledger_options.sla = options.sla;
    ledger_options.examples = options.examples;
    ledger_options.carry_pending = !options.store_uri.empty();
    return ledger_options;
}

// What --missing wrote.
struct MissingWritten {
    std::uint64_t written = 0;
    std::uint64_t filtered_out = 0;
    io::Summary filter_counts; // the census of --filter's paths
};

// The records of every stage into one ledger, with what earlier runs left
// (a store) and past --spill-after keys a spill to disk.
class StageJudge {
public:
    StageJudge(const ReconcileRunOptions& options, io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics),
          m_ledger_options(ledger_options_of(options)), m_remembered(options.stages.size()) {
        if (!options.store_uri.empty()) {
            m_pending.emplace(options);
            if (options.remember.count() > 0) {
                m_remembered = m_pending->load_settled(options.stages.size());
                m_ledger_options.remembered = &m_remembered;
                m_ledger_options.remember = options.remember;
                m_ledger_options.report_settled = true;
            }
        }
        m_ledger.emplace(m_ledger_options);
    }

    // T+1: the keys the last run left pending. Their times count towards
    // "now": a run with nothing newer keeps them pending rather than
    // calling them lost.
    void carry_in() {
        if (!m_pending) return;
        for (const auto& carried : m_pending->load(m_options.stages.size())) {
            m_ledger->carry_in(carried);
            for (const auto& seen : carried.sightings)
                if (seen.timed) later(Timestamp{Duration(seen.last_us)});
        }
        if (m_pending->rerun())
            m_diagnostics.warning({},
                                  "these inputs were reconciled before with this store: starting "
                                  "from the pending keys that run started from, not from its own");
    }

    // About as many keys as the first stage has lines: sized once.
    void expect_keys() {
        const auto& first = m_options.stages.front().path;
        if (first == "-") return;
        std::error_code ignored;
        auto bytes = std::filesystem::file_size(first, ignored);
        auto expected = std::min<std::uintmax_t>(bytes / 100, 50'000'000);
        if (m_options.spill_after > 0)
            expected = std::min<std::uintmax_t>(expected, m_options.spill_after);
        if (!ignored) m_ledger->expect_keys(expected);
    }

    // --traces first (its spans are the records of the span stages), then
    // each other stage's file. The reject file is opened here, once the
    // store has opened: a run that cannot start leaves it as it was.
    void read_stages() {
        m_reader.emplace(m_options, m_diagnostics);
        m_reader->prefetch_keys_with(
            [this](std::uint64_t hash, bool near) { m_ledger->prefetch(hash, near); });
        if (!m_options.traces_path.empty())
            m_services = m_reader->read_other([&](run::RejectRouter& rejects) {
                return detail::read_traces(
                    m_options, rejects,
                    [&](std::size_t s, std::string_view trace, Timestamp span_start) {
                        see(s, trace, span_start, 0, {});
                    });
            });
        for (std::size_t s = 0; s < m_options.stages.size(); ++s) {
            if (!m_options.stages[s].span.empty()) continue; // read with the traces
            m_reader->read(m_options.stages[s],
                           [&](std::string_view key, std::optional<Timestamp> time,
                               std::uint64_t payload, std::string_view,
                               std::string_view by) { see(s, key, time, payload, by); });
        }
    }

    // In memory, or past --spill-after a partition at a time: each key is in
    // one partition only, so the parts add up to what one ledger of
    // everything would say.
    Reconciliation reconcile() {
        if (!m_spill) return m_ledger->reconcile(m_latest);
        Reconciliation reconciliation;
        spill_keys();
        for (std::size_t p = 0; p < KeySpill::k_partitions; ++p) {
            Ledger part(m_ledger_options);
            part.expect_keys(m_spill->parts_in(p));
            m_spill->read(p, [&](const CarriedKey& key) { part.merge_in(key); });
            auto judged = part.judge(m_latest);
            for (std::size_t h = 0; h < judged.latencies.size(); ++h) {
                m_spill->add_latencies(h, judged.latencies[h]);
                judged.latencies[h] = {};
            }
            add_reconciliation(reconciliation, std::move(judged));
        }
        for (std::size_t s = 0; s < reconciliation.stages.size(); ++s)
            reconciliation.stages[s].records = m_ledger->records(s);
        reconciliation.carried_in = m_ledger->carried_in();
        finish_reconciliation(reconciliation, m_ledger_options,
                              [&](std::size_t hop, double fraction) {
                                  return m_spill->latency_percentile(hop, fraction);
                              });
        return reconciliation;
    }

    // T+1: what is still pending, and what this run settled, for the next.
    void carry_out(Reconciliation& reconciliation) {
        reconciliation.carried = m_pending.has_value();
        if (!m_pending) return;
        m_pending->save(reconciliation.carry);
        if (m_ledger_options.report_settled)
            m_pending->save_settled(reconciliation.settled, m_remembered, m_latest,
                                    m_options.remember);
    }

    void flush_rejects() { m_reader->flush(); }

    [[nodiscard]] const std::vector<std::set<std::string>>& services() const { return m_services; }
    [[nodiscard]] std::uint64_t records() const { return m_records; }
    [[nodiscard]] const StageReader& reader() const { return *m_reader; }
    [[nodiscard]] bool carried() const { return m_pending.has_value(); }
    [[nodiscard]] const KeySpill* spill() const { return m_spill.get(); }

private:
    void see(std::size_t s, std::string_view key, std::optional<Timestamp> time,
             std::uint64_t payload, std::string_view by) {
        ++m_records;
        m_ledger->count_record(s);
        m_ledger->see(s, key, time, payload, by);
        if (time) later(*time);
        if (m_options.spill_after > 0 && m_ledger->keys() >= m_options.spill_after) spill_keys();
    }

    void later(Timestamp time) {
        if (!m_latest || time > *m_latest) m_latest = time;
    }

    // Past --spill-after keys: every key so far to the partition files, and
    // the ledger starts again (docs/reconcile.md, "Memory and speed").
    void spill_keys() {
        if (!m_spill) {
            auto directory = m_options.spill_directory.empty()
                                 ? std::filesystem::temp_directory_path()
                                 : m_options.spill_directory;
            m_spill = std::make_unique<KeySpill>(directory, m_options.stages.size());
        }
        m_ledger->drain([&](const CarriedKey& key) { m_spill->add(key); });
    }

    const ReconcileRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    LedgerOptions m_ledger_options;
    std::optional<PendingStore> m_pending;
    RememberedKeys m_remembered;
    std::optional<Ledger> m_ledger;
    std::optional<Timestamp> m_latest; // the latest event time seen: the run's "now"
    std::uint64_t m_records = 0;
    std::optional<StageReader> m_reader; // one reject file across the stages
    std::unique_ptr<KeySpill> m_spill;
    std::vector<std::set<std::string>> m_services; // of each span stage (--traces)
};

// The missing-span ratio per service: of the traces that reached the stage
// before a span stage, how many lack that stage's span.
void add_service_figures(Reconciliation& reconciliation,
                         const std::vector<std::set<std::string>>& services) {
    std::map<std::string, ServiceFigures> by_service;
    for (std::size_t s = 1; s < services.size(); ++s) {
        const auto& hop = reconciliation.hops[s - 1];
        for (const auto& service : services[s]) {
            auto& figures = by_service[service];
            figures.service = service;
            figures.expected += hop.reached + hop.lost;
            figures.missing += hop.lost;
        }
    }
    for (auto& [name, figures] : by_service) {
        figures.missing_ratio = figures.expected == 0 ? 0.0
                                                      : static_cast<double>(figures.missing) /
                                                            static_cast<double>(figures.expected);
        reconciliation.services.push_back(figures);
    }
}

// --missing: again over the stages that hold lost keys, each lost event
// once, as that stage recorded it (envelopes with their headers). Whole or
// not at all: a --filter path no lost event holds (a typo) leaves the file
// as it was, instead of an empty list to resend.
MissingWritten write_missing_events(const ReconcileRunOptions& options,
                                    const Reconciliation& reconciliation,
                                    io::Diagnostics& diagnostics) {
    MissingWritten missing;
    auto sink = io::Sink::replace_file(options.missing_path);
    record::RecordParser filter_parser;
    // --filter's paths and values, against the lost events it sees.
    record::PathCensus filter_census(options.input.allow_absent);
    for (const auto& [path, value] : options.missing_filters)
        filter_census.expect_value("--filter", path, value);
    filter_parser.report_paths_to(&filter_census);
    std::string padded;
    auto wanted_by_filters = [&](std::string_view bytes) {
        padded.assign(bytes);
        padded.append(io::k_padding_bytes, ' ');
        if (filter_parser.parse(std::string_view(padded).substr(0, bytes.size()))) return false;
        for (const auto& [path, value] : options.missing_filters) {
            auto found = filter_parser.find(path);
            if (!found || found->text != value) return false;
        }
        return true;
    };
    std::unordered_set<std::string> written;
    io::SilentDiagnostics quiet;
    ReconcileRunOptions again = options;
    again.reject_path.clear();
    StageReader rereader(again, quiet, false);
    for (std::size_t s = 0; s < options.stages.size(); ++s) {
        // A span cannot be sent again: lost keys first seen in a trace are
        // in the report only.
        bool wanted = options.stages[s].span.empty() &&
                      std::any_of(reconciliation.missing.begin(), reconciliation.missing.end(),
                                  [&](const auto& entry) { return entry.second == s; });
        if (!wanted) continue;
        rereader.read(options.stages[s],
                      [&](std::string_view key, std::optional<Timestamp>, std::uint64_t,
                          std::string_view bytes, std::string_view) {
                          auto found = reconciliation.missing.find(std::string(key));
                          if (found == reconciliation.missing.end() || found->second != s) return;
                          if (!written.insert(found->first).second) return;
                          if (!options.missing_filters.empty() && !wanted_by_filters(bytes)) {
                              ++missing.filtered_out;
                              return;
                          }
                          sink->write_record(bytes);
                          ++missing.written;
                      });
    }
    sink->flush();
    filter_census.report(diagnostics, missing.filter_counts);
    if (missing.filter_counts.count("absent_paths") == 0) sink->publish();
    return missing;
}

void write_report(const Reconciliation& reconciliation, const ReconcileRunOptions& options,
                  io::Sink& output) {
    std::string text;
    render_report(reconciliation, options.report, text);
    if (options.report == ReportFormat::table) text = fit_lines(text, options.table_width);
    output.write(text);
    output.flush();
}

io::Summary summary_of(const ReconcileRunOptions& options, const StageJudge& judge,
                       const Reconciliation& reconciliation, const MissingWritten& missing) {
    io::Summary summary;
    summary.command = "reconcile";
    const auto& reader = judge.reader();
    summary.counts = {{"in", judge.records() + reader.rejected()}, {"keys", reconciliation.keys}};
    for (std::size_t i = 0; i < k_finding_kinds; ++i)
        summary.counts.emplace_back(std::string(finding_name(static_cast<Finding>(i))),
                                    reconciliation.counts[i]);
    summary.counts.emplace_back("rejected", reader.rejected());
    for (const io::Summary* counts :
         {&reader.census(), static_cast<const io::Summary*>(&missing.filter_counts)})
        for (const auto& [name, count] : counts->counts) {
            const auto& wanted = name; // a lambda captures no structured binding in clang 14
            auto known = std::find_if(summary.counts.begin(), summary.counts.end(),
                                      [&](const auto& c) { return c.first == wanted; });
            if (known == summary.counts.end())
                summary.counts.emplace_back(name, count);
            else
                known->second += count;
        }
    if (!options.missing_path.empty()) {
        summary.counts.emplace_back("missing_file", missing.written);
        if (!options.missing_filters.empty())
            summary.counts.emplace_back("missing_filtered_out", missing.filtered_out);
    }
    if (judge.carried()) {
        summary.counts.emplace_back("carried_in", reconciliation.carried_in);
        summary.counts.emplace_back("carried_out", reconciliation.carry.size());
        if (options.remember.count() > 0)
            summary.counts.emplace_back("seen_before", reconciliation.seen_before);
    }
    if (const auto* spill = judge.spill())
        summary.facts.emplace_back("grouped",
                                   fmt::format("on disk, {} partitions, {:.1f} MB spilled",
                                               KeySpill::k_partitions,
                                               static_cast<double>(spill->bytes_written()) / 1e6));
    summary.parts_name = "hop";
    for (const auto& hop : reconciliation.hops) {
        io::Summary::Part part;
        part.name = fmt::format("{}>{}", hop.from, hop.to);
        part.counts = {{"keys", hop.keys},
                       {"reached", hop.reached},
                       {"lost", hop.lost},
                       {"pending", hop.pending}};
        part.ratios = {{"loss_rate", hop.loss_rate}};
        summary.parts.push_back(std::move(part));
    }
    return summary;
}

} // namespace

ReconcileResult run_reconcile(const ReconcileRunOptions& options, io::Sink& output,
                              io::Diagnostics& diagnostics) {
    auto start = std::chrono::steady_clock::now();
    StageJudge judge(options, diagnostics); // opens the store; --remember's settled keys
    judge.carry_in();
    judge.expect_keys();
    judge.read_stages();
    auto reconciliation = judge.reconcile();
    judge.carry_out(reconciliation);
    add_service_figures(reconciliation, judge.services());
    MissingWritten missing;
    if (!options.missing_path.empty())
        missing = write_missing_events(options, reconciliation, diagnostics);
    write_report(reconciliation, options, output);
    judge.flush_rejects();

    ReconcileResult result;
    result.summary = summary_of(options, judge, reconciliation, missing);
    result.summary.seconds = io::seconds_since(start);
    result.reconciliation = std::move(reconciliation);
    return result;
}

} // namespace idem::reconcile
