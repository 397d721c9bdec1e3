// idem reorder over a stream of records (docs/reorder.md).

#include "idem/reorder/run.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/block_pipeline.hpp"
#include "idem/reorder/detail/judge.hpp"
#include "idem/reorder/order_key.hpp"
#include "idem/store/owned_files.hpp"
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

using store::open_owned;

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
        : m_options(options), m_diagnostics(diagnostics), m_sequencer(options.sequencer, *this) {
        auto location = store::parse_store_uri(options.store_uri);
        location.lock_timeout = options.lock_timeout;
        // Commits write what changed, a few pages each: memory is for held
        // records, not for caching the file.
        location.cache_bytes = 4ULL << 20;
        m_store = store::open_store(location);
        m_persistent = location.kind != store::StoreKind::memory;
        if (!options.reject_path.empty())
            m_reject_sink = io::Sink::create_file(options.reject_path);
        open_outputs(standard_output);
        m_rejects.emplace(m_reject_sink.get(), options.strictness, diagnostics,
                          options.input.max_record_bytes);
        m_input.emplace(options.input, &*m_rejects);
    }

    ReorderResult run() {
        auto start = std::chrono::steady_clock::now();
        restore_held();
        std::vector<std::unique_ptr<WorkerState>> states;
        for (std::size_t i = 0; i < record::worker_count(m_options.threads); ++i)
            states.push_back(std::make_unique<WorkerState>());
        try {
            record::run_block_pipeline<WorkerState, BlockOutcome>(
                *m_input, states,
                [&](const record::InputBlock& block, WorkerState& state, BlockOutcome& result) {
                    detail::judge_block(block, state, m_options, result);
                },
                [&](const record::InputBlock& block, BlockOutcome& result) {
                    emit_block(block, result);
                },
                [&] { idle(); }, record::k_idle_interval, k_reorder_block_bytes);
        } catch (const InputError&) {
            commit(); // what was released before the failure stands
            throw;
        }
        if (m_options.at_end == AtEnd::flush) m_sequencer.flush();
        finish();
        note_earlier_runs();
        return summarize(start);
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
    // With -o, a checkpoint left by a killed run says how far it got.
    void open_outputs(io::Sink& standard_output) {
        m_owns_output = !m_options.output_path.empty();
        std::optional<store::Checkpoint> checkpoint;
        if (m_owns_output) {
            m_input_identity = store::input_identity(m_options.input.paths);
            auto resumption =
                store::find_resumption(*m_store, "reorder", m_options.scope, m_options.output_path,
                                       m_input_identity, m_diagnostics);
            m_checkpoint_key = std::move(resumption.checkpoint_name);
            checkpoint = std::move(resumption.checkpoint);
        }
        m_owned_output = open_owned(m_options.output_path, checkpoint, "output");
        m_output = m_owned_output ? m_owned_output.get() : &standard_output;
        auto owned_checkpoint = m_owns_output ? checkpoint : std::nullopt;
        m_gaps = open_owned(m_options.gaps_path, owned_checkpoint, "gaps");
        m_late = open_owned(m_options.late_path, owned_checkpoint, "late");
        m_skip = checkpoint ? checkpoint->records_done : 0;
    }

    // What earlier runs held (--hold, or a run that was killed): back in
    // the sequencer, with the progress of their partitions.
    void restore_held() {
        auto rows = m_store->load_held(m_options.scope);
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
        auto progress = m_store->load_partitions(m_options.scope, keys);
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

    // Only partitions with a gap or a late record need one: kept apart.
    const std::string& label_of(const Partition& partition) {
        auto [slot, inserted] = m_labels.try_emplace(&partition);
        if (inserted)
            slot->second = partition_label(partition.key(), m_options.partition_fields.size());
        return slot->second;
    }

    void emit_block(const record::InputBlock& block, BlockOutcome& result) {
        m_positions.start_block(block);
        auto partitions = resolve_partitions(result);
        auto now = now_utc();
        std::size_t next_failure = 0;
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            auto& outcome = result.outcomes[i];
            ++m_records;
            if (m_records % record::k_progress_every == 0)
                m_diagnostics.progress(m_records, m_input->bytes_read());
            const detail::Failure* failure = nullptr;
            if (next_failure < result.failures.size() && result.failures[next_failure].outcome == i)
                failure = &result.failures[next_failure++];
            if (m_records <= m_skip) continue; // done by the run this one resumes
            auto record = m_positions.locate(block, outcome.line);
            if (!set_aside(outcome, failure, record)) continue;
            auto arrival = m_options.time_field ? outcome.event_time : now;
            auto offer = m_sequencer.offer(*partitions[i], outcome.key, record.bytes, arrival);
            if (offer.verdict != Verdict::accepted)
                route_late(record, *partitions[i], outcome, offer);
            if (m_options.time_field && outcome.event_time > m_event_clock) {
                m_event_clock = outcome.event_time;
                m_sequencer.advance_clock(m_event_clock);
            }
        }
        if (auto oversized = m_positions.finish_block(block, result.lines)) {
            ++m_records;
            if (m_records > m_skip) m_rejects->reject_oversized(*oversized);
        }
        if (!m_options.time_field) m_sequencer.advance_clock(now_utc());
        if (m_records > m_skip) m_since_commit += result.outcomes.size();
        if (m_since_commit >= m_options.batch || too_many_partitions()) commit();
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
                   record::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long:
            record.oversized_bytes = record.bytes.size();
            m_rejects->reject_oversized(record);
            return false;
        case Outcome::Kind::failed_to_parse:
        case Outcome::Kind::bad_field:
            m_rejects->reject(record, failure ? failure->column : 0,
                              failure ? failure->message : "not a record");
            return false;
        case Outcome::Kind::ordered:
            return true;
        }
        return false;
    }

    // A late or duplicate record: to --late FILE with the reason, or a warning.
    void route_late(const record::InputRecord& record, const Partition& partition,
                    const Outcome& outcome, const Offer& offer) {
        bool duplicate = offer.verdict == Verdict::duplicate;
        auto mode = m_options.sequencer.mode;
        if (!m_late) {
            auto what = mode == OrderMode::sequence ? "sequence" : "time";
            m_diagnostics.warning(
                {*record.source, record.line, 0, record.byte_offset},
                duplicate ? fmt::format("duplicate: {} {} of partition {} is already held "
                                        "(give --late FILE to keep such records)",
                                        what, describe_key(mode, outcome.key), label_of(partition))
                          : fmt::format("late: {} {} of partition {} came after the partition "
                                        "had moved on to {} (give --late FILE to keep such "
                                        "records)",
                                        what, describe_key(mode, outcome.key), label_of(partition),
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
        record::write_annotated(*m_late, record.bytes, has_annotations(record.bytes), m_member);
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
        if (m_since_commit > 0 || m_sequencer.counts().released != m_released_at_commit)
            commit();
        else
            flush_outputs();
    }

    void flush_outputs() {
        m_output->flush();
        if (m_gaps) m_gaps->flush();
        if (m_late) m_late->flush();
    }

    // Output first, then the store: a crash in between makes a rerun repeat
    // what was released since the last commit (at-least-once on stdout),
    // never lose it. Files idem owns are synced and their sizes committed
    // with the sequencer's state, which makes a rerun exact.
    void commit() {
        flush_outputs();
        m_since_commit = 0;
        m_released_at_commit = m_sequencer.counts().released;
        if (m_owns_output) m_store->save_checkpoint(m_checkpoint_key, synced_progress());
        save_changes();
        m_store->commit();
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
        m_sequencer.drain_changes([&](const store::ReorderChanges& changes) {
            if (m_persistent) m_store->save_reorder_changes(m_options.scope, changes);
        });
    }

    // The owned outputs on disk, and how far they go.
    store::Checkpoint synced_progress() {
        m_output->sync();
        if (m_gaps) m_gaps->sync();
        if (m_late) m_late->sync();
        store::Checkpoint done;
        done.records_done = std::max(m_records, m_skip);
        done.file_bytes["output"] = m_output->size();
        if (m_gaps) done.file_bytes["gaps"] = m_gaps->size();
        if (m_late) done.file_bytes["late"] = m_late->size();
        return done;
    }

    // The last commit. Its checkpoint is marked finished: a rerun over the
    // same input (this run killed before it could exit) leaves the outputs
    // as they are; a run over another input starts them anew.
    void finish() {
        flush_outputs();
        if (m_owns_output)
            store::save_finished(*m_store, m_checkpoint_key, synced_progress(), m_input_identity);
        save_changes();
        m_store->commit();
        if (m_reject_sink) m_reject_sink->flush();
    }

    ReorderResult summarize(std::chrono::steady_clock::time_point start) const {
        const auto& counts = m_sequencer.counts();
        ReorderResult result;
        result.gaps = counts.gaps;
        result.late = counts.late + counts.duplicates;
        auto& summary = result.summary;
        summary.command = "reorder";
        summary.counts = {{"in", m_records}};
        if (m_skip > 0) summary.counts.emplace_back("resumed", std::min(m_skip, m_records));
        if (m_restored > 0) summary.counts.emplace_back("restored", m_restored);
        summary.counts.emplace_back("released", counts.released);
        summary.counts.emplace_back("late", counts.late);
        summary.counts.emplace_back("duplicates", counts.duplicates);
        summary.counts.emplace_back("held", counts.held);
        summary.counts.emplace_back("rejected", m_rejects->count());
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
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const ReorderRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    Sequencer m_sequencer;
    std::unique_ptr<store::Store> m_store;
    std::unique_ptr<io::Sink> m_reject_sink;
    std::unique_ptr<io::Sink> m_owned_output;
    io::Sink* m_output = nullptr;
    std::unique_ptr<io::Sink> m_gaps;
    std::unique_ptr<io::Sink> m_late;
    bool m_owns_output = false;
    std::string m_checkpoint_key;
    std::optional<std::uint64_t> m_input_identity; // with -o: what this run reads
    std::uint64_t m_skip = 0;
    std::optional<record::RejectRouter> m_rejects;
    std::optional<record::InputStream> m_input;
    record::PositionTracker m_positions;
    record::RecordParser m_parser;
    std::unordered_map<const Partition*, std::string> m_labels;
    std::string m_line;
    std::string m_member;
    std::uint64_t m_records = 0;
    std::uint64_t m_restored = 0;
    std::uint64_t m_resumed_partitions = 0; // with a position an earlier run saved
    bool m_forgot_partitions = false;
    std::uint64_t m_since_commit = 0;
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
    auto held = store->load_held(scope).size();
    store->clear_reorder_state(scope);
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
