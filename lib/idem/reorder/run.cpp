// idem reorder over a stream of records (docs/reorder.md).

#include "idem/reorder/run.hpp"

#include "idem/order/order_key.hpp"
#include "idem/record/annotate.hpp"
#include "idem/reorder/detail/judge.hpp"
#include "idem/run/record_run.hpp"
#include "idem/store/checkpoints.hpp"
#include "idem/store/owned_outputs.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <unordered_map>
#include <unordered_set>

namespace idem::reorder {

namespace {

using detail::BlockOutcome;
using detail::Outcome;
using detail::WorkerState;

// Partitions with nothing held are remembered in memory (about 200 bytes
// each) up to this many; beyond it they are committed, forgotten, and read
// back from the store when they come again, so memory follows what is held,
// not the input.
constexpr std::size_t k_cached_partitions = 1 << 17;
// Sequenced records are often a few dozen bytes: a 1 MiB block is then 26k
// outcomes (2 MiB) per block in flight, and what the pipeline holds is part
// of the fixed base of reorder's memory bound (2x the held records + 50 MB).
// Quarter blocks cut that base by 10 MB at no cost in speed.
constexpr std::size_t k_reorder_block_bytes = 256 << 10;

std::string describe_key(OrderMode mode, OrderKey key) {
    if (mode == OrderMode::sequence) return std::to_string(key.primary);
    auto at = format_rfc3339(Timestamp(Duration(key.primary)));
    return key.secondary == 0 ? at : fmt::format("{} (logical {})", at, key.secondary);
}

// The ordered stage of a reorder run: everything with side effects happens
// here, on the calling thread, in input order.
class ReorderRun final : public SequencerEvents {
public:
    ReorderRun(const ReorderRunOptions& options, io::Sink& standard_output,
               io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_sequencer(options.sequencer, *this),
          m_store(open_store(options)), m_state(m_store->sequencer()),
          m_outputs(m_store->checkpoints(),
                    {"reorder", options.scope, options.input.paths, options.lock_timeout},
                    options.output_path, standard_output, diagnostics),
          m_output(&m_outputs.output()), m_gaps(m_outputs.add("gaps", options.gaps_path)),
          m_late(m_outputs.add("late", options.late_path)),
          m_run({.input = options.input,
                 .reject_sink = m_outputs.add("reject", options.reject_path),
                 .strictness = options.strictness,
                 .threads = options.threads,
                 .block_bytes = k_reorder_block_bytes,
                 .busy_ordered_stage = true},
                diagnostics) {
        m_persistent = store::parse_store_uri(options.store_uri).kind != store::StoreKind::memory;
        m_run.resume_after(m_outputs.resume_point());
    }

    ReorderResult run() {
        auto start = std::chrono::steady_clock::now();
        restore_held();
        auto& census = m_run.census();
        if (m_options.sequence_field) census.expect_path("--seq", *m_options.sequence_field);
        if (m_options.order_by) census.expect_path("--order-by", *m_options.order_by);
        for (const auto& path : m_options.partition_fields)
            census.expect_path("--partition", path);
        if (m_options.time_field) census.expect_path("--time-field", *m_options.time_field);
        auto states = m_run.states([] { return std::make_unique<WorkerState>(); });
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockOutcome& result) {
            detail::judge_block(block, state, m_options, result);
        };
        steps.prepare = [&](const run::InputBlock&, BlockOutcome& result) {
            m_block_partitions = resolve_partitions(result);
            m_block_failures = &result;
            m_block_now = now_utc();
            m_next_failure = 0;
        };
        auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t index) {
            route_record(outcome, record, index);
        };
        steps.block_done = [&](std::uint64_t) {
            if (!m_options.time_field) m_sequencer.advance_clock(now_utc());
        };
        steps.commit = [&] { commit(); };
        steps.commit_every = m_options.batch;
        steps.commit_due = [&] { return too_many_partitions(); };
        steps.idle = [&] { idle(); };
        m_run.run(states, steps, route);
        if (m_options.at_end == AtEnd::flush) m_sequencer.flush();
        finish();
        note_earlier_runs();
        auto result = summarize(start);
        m_outputs.add_carried(result.summary.counts);
        census.report(m_diagnostics, result.summary);
        result.gaps = result.summary.count("gaps");
        result.late = result.summary.count("late") + result.summary.count("duplicates");
        return result;
    }

    // SequencerEvents
    void release(const Partition&, std::string_view bytes) override {
        m_output->write_record(bytes);
    }

    void gap(const Partition& partition, std::int64_t from, std::int64_t to) override {
        m_line.assign(R"({"_idem":{"gap":{"partition":)");
        m_line += label_of(partition);
        fmt::format_to(std::back_inserter(m_line), R"(,"from":{},"to":{},"missing":{}}}}}}})", from,
                       to, to - from + 1);
        (m_gaps ? *m_gaps : *m_output).write_record(m_line);
    }

private:
    using Run = run::RecordRun<WorkerState, BlockOutcome>;

    static std::unique_ptr<store::Store> open_store(const ReorderRunOptions& options) {
        auto location = store::parse_store_uri(options.store_uri);
        location.lock_timeout = options.lock_timeout;
        location.cache_bytes = store::k_commit_only_store_cache_bytes;
        return store::open_store(location);
    }

    // What earlier runs held (--hold, or a run that was killed): back in
    // the sequencer, with the progress of their partitions.
    void restore_held() {
        auto rows = m_state.load_held(m_options.scope);
        if (rows.empty()) return;
        std::vector<std::string> keys;
        std::unordered_set<std::string_view> seen;
        for (const auto& row : rows)
            if (seen.insert(row.partition).second) keys.push_back(row.partition);
        add_partitions(keys);
        m_restored = rows.size();
        m_sequencer.restore(std::move(rows));
    }

    void add_partitions(const std::vector<std::string>& keys) {
        auto progress = m_state.load_partitions(m_options.scope, keys);
        for (std::size_t i = 0; i < keys.size(); ++i) {
            // Until this run forgets a partition, one the store knows was
            // left by an earlier run.
            if (progress[i] && progress[i]->started && !m_forgot_partitions) ++m_resumed_partitions;
            m_sequencer.add(keys[i], progress[i]);
        }
    }

    // An earlier run's state changes what this one releases: said once, so
    // that a rerun that prints nothing is not a mystery.
    void note_earlier_runs() const {
        if (!m_persistent || (m_resumed_partitions == 0 && m_restored == 0)) return;
        m_diagnostics.warning(
            {},
            fmt::format("resumed {} partition{} and {} held record{} that an earlier run left "
                        "in {} (scope {}): records before their saved positions count as late; "
                        "--store :memory: or --reset for a fresh run",
                        m_resumed_partitions, m_resumed_partitions == 1 ? "" : "s", m_restored,
                        m_restored == 1 ? "" : "s", m_store->describe(), quote(m_options.scope)));
    }

    // " of partition <label>" in a message; nothing without --partition
    // (the one partition has no name: "partition null" said nothing).
    std::string partition_clause(const Partition& partition) {
        if (m_options.partition_fields.empty()) return {};
        return " of partition " + label_of(partition);
    }

    // Only partitions with a gap or a late record need one: kept apart.
    const std::string& label_of(const Partition& partition) {
        auto [slot, inserted] = m_labels.try_emplace(&partition);
        if (inserted)
            slot->second =
                order::partition_label(partition.key(), m_options.partition_fields.size());
        return slot->second;
    }

    void route_record(const Outcome& outcome, run::InputRecord& record, std::size_t index) {
        const detail::Failure* failure = nullptr;
        const auto& failures = m_block_failures->failures;
        // Failures are listed in outcome order; skipped records skip theirs.
        while (m_next_failure < failures.size() && failures[m_next_failure].outcome < index)
            ++m_next_failure;
        if (m_next_failure < failures.size() && failures[m_next_failure].outcome == index)
            failure = &failures[m_next_failure++];
        if (!set_aside(outcome, failure, record)) return;
        auto& partition = *m_block_partitions[index];
        auto arrival = m_options.time_field ? outcome.event_time : m_block_now;
        // How far behind its partition's newest stamp a record came: what
        // --max-lateness must cover to put it in order (--suggest).
        if (m_options.suggest && partition.started && outcome.key < partition.highest)
            m_lateness.push_back(partition.highest.primary - outcome.key.primary);
        auto offer = m_sequencer.offer(partition, outcome.key, record.bytes, arrival);
        if (offer.verdict != Verdict::accepted) route_late(record, partition, outcome, offer);
        if (m_options.time_field && outcome.event_time > m_event_clock) {
            m_event_clock = outcome.event_time;
            m_sequencer.advance_clock(m_event_clock);
        }
    }

    // Partitions that hold something cannot be forgotten: wait until twice
    // as many as the last time before trying again.
    [[nodiscard]] bool too_many_partitions() const {
        return m_persistent &&
               m_sequencer.partitions() > std::max(k_cached_partitions, 2 * m_partitions_kept);
    }

    // The partition of every ordered record of the block, those new to this
    // run read from the store in one call.
    std::vector<Partition*> resolve_partitions(const BlockOutcome& result) {
        std::vector<Partition*> partitions(result.outcomes.size(), nullptr);
        std::vector<std::string> unknown;
        std::unordered_set<std::string_view> asked;
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            const auto& outcome = result.outcomes[i];
            if (outcome.kind != Outcome::Kind::ordered) continue;
            auto key = result.partition_of(outcome);
            partitions[i] = m_sequencer.find(key);
            if (!partitions[i] && asked.insert(key).second) unknown.emplace_back(key);
        }
        if (unknown.empty()) return partitions;
        add_partitions(unknown);
        for (std::size_t i = 0; i < result.outcomes.size(); ++i)
            if (!partitions[i] && result.outcomes[i].kind == Outcome::Kind::ordered)
                partitions[i] = m_sequencer.find(result.partition_of(result.outcomes[i]));
        return partitions;
    }

    // Rejects; true when the record goes on to the sequencer.
    bool set_aside(const Outcome& outcome, const detail::Failure* failure,
                   run::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long:      // the run frame set it aside
        case Outcome::Kind::outside_range: // ... or counted it
            return false;
        case Outcome::Kind::failed_to_parse:
        case Outcome::Kind::bad_field:
            m_run.rejects().reject(record, failure ? failure->column : 0,
                                   failure ? failure->message : "not a record");
            return false;
        case Outcome::Kind::ordered:
            return true;
        }
        return false;
    }

    // A late or duplicate record: to --late FILE with the reason, or a warning.
    void route_late(const run::InputRecord& record, const Partition& partition,
                    const Outcome& outcome, const Offer& offer) {
        bool duplicate = offer.verdict == Verdict::duplicate;
        auto mode = m_options.sequencer.mode;
        // Nothing is lost unasked: without --late FILE a late record goes to
        // the output, marked (_idem.late); --drop-late drops it.
        if (m_options.drop_late) {
            auto what = mode == OrderMode::sequence ? "sequence" : "time";
            m_diagnostics.warning(
                {*record.source, record.line, 0, record.byte_offset},
                duplicate ? fmt::format("duplicate: {} {}{} is already held; dropped "
                                        "(--drop-late)",
                                        what, describe_key(mode, outcome.key),
                                        partition_clause(partition))
                          : fmt::format("late: {} {}{} came after the {} had moved on to {}; "
                                        "dropped (--drop-late)",
                                        what, describe_key(mode, outcome.key),
                                        partition_clause(partition),
                                        m_options.partition_fields.empty() ? "stream" : "partition",
                                        describe_key(mode, offer.expected)));
            return;
        }
        m_member.assign(R"("late":{"reason":)");
        m_member += duplicate ? R"("duplicate")" : R"("late")";
        m_member += R"(,"partition":)";
        m_member += label_of(partition);
        if (mode == OrderMode::sequence) {
            fmt::format_to(std::back_inserter(m_member), R"(,"seq":{})", outcome.key.primary);
            if (!duplicate)
                fmt::format_to(std::back_inserter(m_member), R"(,"expected":{})",
                               offer.expected.primary);
        } else {
            m_member += R"(,"watermark":)";
            record::append_json_string(m_member, describe_key(mode, offer.expected));
        }
        fmt::format_to(std::back_inserter(m_member), R"(,"source":)");
        record::append_json_string(m_member, fmt::format("{}:{}", *record.source, record.line));
        m_member += '}';
        record::write_annotated(m_late ? *m_late : *m_output, record.bytes,
                                has_annotations(record.bytes), m_member);
    }

    // Whether a record already carries "_idem" (rare: only late records ask).
    bool has_annotations(std::string_view bytes) {
        if (m_parser.parse(bytes)) return false;
        return m_parser.has_annotations();
    }

    // Live input gone quiet: what was released goes out now, and gaps that
    // have waited long enough by the wall clock are skipped.
    void idle() {
        if (!m_options.time_field) m_sequencer.advance_clock(now_utc());
        if (m_run.records_since_commit() > 0 ||
            m_sequencer.counts().released != m_released_at_commit)
            m_run.commit();
        else
            m_outputs.flush();
    }

    // Output first, then the store: a crash in between makes a rerun repeat
    // what was released since the last commit (at-least-once on stdout),
    // never lose it. Files idem owns are synced and their sizes committed
    // with the sequencer's state, which makes a rerun exact.
    void commit() {
        m_released_at_commit = m_sequencer.counts().released;
        m_outputs.commit(m_store.get(), m_run.records_done(), carried_counts(),
                         [&] { save_changes(); });
        if (too_many_partitions()) {
            m_labels.clear(); // their partitions may be forgotten
            m_sequencer.forget_idle();
            m_forgot_partitions = true;
            m_partitions_kept = m_sequencer.partitions();
        }
    }

    // A :memory: store outlives no run: the sequencer's own state is all
    // there is, and a copy in the store would only double the memory.
    void save_changes() {
        m_sequencer.drain_changes([&](const order::ReorderChanges& changes) {
            if (m_persistent) m_state.save_reorder_changes(m_options.scope, changes);
        });
    }

    // The last commit. Its checkpoint is marked finished: a rerun over the
    // same input (this run killed before it could exit) leaves the outputs
    // as they are; a run over another input starts them anew.
    void finish() {
        m_outputs.commit_finished(m_store.get(), m_run.records_done(), carried_counts(),
                                  [&] { save_changes(); });
        m_run.flush_rejects();
    }

    // What this run counted that a run resuming it carries on from.
    store::RunCounts carried_counts() const {
        return store::only_named(summarize({}).summary.counts,
                                 {"released", "late", "duplicates", "rejected", "outside_range",
                                  "gaps", "missing", "timed_out", "out", "gaps_file", "late_file"});
    }

    // This run's own counts (add_carried() makes them the whole input's).
    ReorderResult summarize(std::chrono::steady_clock::time_point start) const {
        const auto& counts = m_sequencer.counts();
        ReorderResult result;
        result.gaps = counts.gaps;
        result.late = counts.late + counts.duplicates;
        auto& summary = result.summary;
        summary.command = "reorder";
        summary.counts = {{"in", m_run.records()}};
        if (m_run.resume_point() > 0) summary.counts.emplace_back("resumed", m_run.skipped());
        if (m_restored > 0) summary.counts.emplace_back("restored", m_restored);
        summary.counts.emplace_back("released", counts.released);
        summary.counts.emplace_back("late", counts.late);
        summary.counts.emplace_back("duplicates", counts.duplicates);
        summary.counts.emplace_back("held", counts.held);
        summary.counts.emplace_back("rejected", m_run.rejects().count());
        m_run.add_window_count(summary.counts);
        if (m_options.sequencer.mode == OrderMode::sequence) {
            summary.counts.emplace_back("gaps", counts.gaps);
            summary.counts.emplace_back("missing", counts.missing);
            if (m_options.sequencer.gap_timeout.count() > 0)
                summary.counts.emplace_back("timed_out", counts.timeouts);
        }
        summary.counts.emplace_back("out", m_output->records_written());
        if (m_gaps) summary.counts.emplace_back("gaps_file", m_gaps->records_written());
        if (m_late) summary.counts.emplace_back("late_file", m_late->records_written());
        summary.counts.emplace_back("peak_held", counts.peak_held);
        summary.counts.emplace_back("peak_held_bytes", counts.peak_held_bytes);
        summary.facts.emplace_back("store", m_store->describe());
        if (m_options.suggest) {
            // --max-lateness covering 99%, 99.9% and all of the out-of-order records.
            std::string text = fmt::format("{} record{} came behind a newer one", m_lateness.size(),
                                           m_lateness.size() == 1 ? "" : "s");
            for (const auto& covering : covering_durations(m_lateness))
                text += fmt::format("; {:g}%: --max-lateness {}", covering.coverage * 100,
                                    format_duration(covering.duration));
            summary.facts.emplace_back("suggest", text);
        }
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const ReorderRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    Sequencer m_sequencer;
    std::unique_ptr<store::Store> m_store;
    store::SequencerStore& m_state;
    store::OwnedOutputs m_outputs;
    io::Sink* m_output;
    io::Sink* m_gaps;
    io::Sink* m_late;
    Run m_run;
    // The block being routed: its partitions, its failures, its time.
    std::vector<Partition*> m_block_partitions;
    const BlockOutcome* m_block_failures = nullptr;
    std::size_t m_next_failure = 0;
    Timestamp m_block_now;
    record::RecordParser m_parser;
    std::unordered_map<const Partition*, std::string> m_labels;
    std::string m_line;
    std::string m_member;
    std::uint64_t m_restored = 0;
    std::vector<std::int64_t> m_lateness; // --suggest: microseconds behind, per late-coming record
    std::uint64_t m_resumed_partitions = 0; // with a position an earlier run saved
    bool m_forgot_partitions = false;
    std::uint64_t m_released_at_commit = 0;
    std::size_t m_partitions_kept = 0; // after the last forget_idle()
    bool m_persistent = true;          // false: :memory:
    Timestamp m_event_clock = Timestamp::min();
};

} // namespace

ReorderResult run_reorder(const ReorderRunOptions& options, io::Sink& standard_output,
                          io::Diagnostics& diagnostics) {
    return ReorderRun(options, standard_output, diagnostics).run();
}

io::Summary reset_reorder(const std::string& store_uri, const std::string& scope) {
    auto start = std::chrono::steady_clock::now();
    auto store = store::open_store(store::parse_store_uri(store_uri));
    auto held = store->sequencer().load_held(scope).size();
    store->sequencer().clear_reorder_state(scope);
    store->commit();
    io::Summary summary;
    summary.command = "reorder --reset";
    summary.counts = {{"held_dropped", held}};
    summary.facts.emplace_back("scope", scope);
    summary.facts.emplace_back("store", store->describe());
    summary.seconds = io::seconds_since(start);
    return summary;
}

} // namespace idem::reorder
