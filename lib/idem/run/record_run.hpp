#pragma once
// The run frame every record-processing subcommand shares
// (docs/architecture.md, "The run frame"): it owns the reject router (over
// the reject file the command opened), the inputs, record positions,
// progress, lines too long to hold, and the records a resumed run skips. A
// subcommand supplies two steps: a worker step that judges a block of lines
// on a worker thread, and a routing step that acts on one judged record on
// the calling thread, in input order.
//
// A Result (one per block) has `outcomes`, each with the `line`
// (io::BlockLine) it judged, and `lines`, every line of the block counted
// (blank ones too, for line numbers), and clear().

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/parser.hpp"
#include "idem/record/path_census.hpp"
#include "idem/run/block_pipeline.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/crash_point.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/interrupt.hpp"

#include <csignal>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace idem::run {

// The Result of a block for a subcommand that needs nothing beside its
// outcomes.
template <typename Outcome> struct BlockOutcomes {
    std::vector<Outcome> outcomes;
    std::uint64_t lines = 0; // blank ones included, for line numbers

    void clear() {
        outcomes.clear();
        lines = 0;
    }
};

// A worker's first step on a line: false when the line is too long to hold
// (Kind::too_long: the frame sets it aside) or not one JSON object
// (Kind::failed_to_parse, with the column and why, for the reject file);
// true when `parser` holds the record.
template <typename Outcome>
bool parse_line(const io::BlockLine& line, std::uint64_t max_record_bytes,
                record::RecordParser& parser, Outcome& outcome) {
    if (line.bytes.size() > max_record_bytes) {
        outcome.kind = Outcome::Kind::too_long;
        return false;
    }
    if (auto failure = parser.parse(line.bytes)) {
        outcome.kind = Outcome::Kind::failed_to_parse;
        outcome.column = failure->column;
        outcome.message = std::move(failure->message);
        return false;
    }
    return true;
}

// What the frame needs to know about a run; every subcommand's options
// carry these.
struct RecordRunSetup {
    const InputOptions& input;
    // The reject file, opened by the command through its outputs
    // (store::OwnedOutputs, so a resumed run keeps what was rejected
    // before), and owned by it; null: warnings and counts only. Several
    // frames reading one input after another share one.
    io::Sink* reject_sink = nullptr;
    Strictness strictness = Strictness::lenient;
    std::size_t threads = 0; // 0: one worker per core, at most 8
    std::size_t block_bytes = k_block_bytes;
    // The run's own thread judges in order and is a core's work (see
    // worker_count()): by default, one worker fewer.
    bool busy_ordered_stage = false;
    std::chrono::milliseconds idle_interval = k_idle_interval;
    // A stop asked by a signal (util/interrupt.hpp): when it holds one, the
    // run throws Interrupted after the block it is routing. Null: never.
    const std::atomic<int>* interrupt = nullptr;
};

// The parts of the frame that do not depend on the subcommand's types.
class RecordRunFrame {
public:
    // Opens every input (a missing one throws InputError naming it).
    RecordRunFrame(const RecordRunSetup& setup, io::Diagnostics& diagnostics);
    RecordRunFrame(const RecordRunFrame&) = delete;
    RecordRunFrame& operator=(const RecordRunFrame&) = delete;

    [[nodiscard]] RejectRouter& rejects() { return *m_rejects; }
    [[nodiscard]] const RejectRouter& rejects() const { return *m_rejects; }
    [[nodiscard]] InputStream& input() { return *m_input; }
    // The paths and values the run was given, checked against every record
    // its workers parse (states() hands it to each worker's parser).
    [[nodiscard]] record::PathCensus& census() { return m_census; }

    // The first `records` records were done by the run this one resumes
    // (OwnedOutputs): they are read again for their positions, but neither
    // routed nor rejected again.
    void resume_after(std::uint64_t records) { m_resume_point = records; }
    [[nodiscard]] std::uint64_t resume_point() const { return m_resume_point; }
    // Records seen so far (blank lines are none), rejected ones included.
    [[nodiscard]] std::uint64_t records() const { return m_records; }
    // Of those, the ones a resumed run skipped.
    [[nodiscard]] std::uint64_t skipped() const { return std::min(m_records, m_resume_point); }
    // Records done by this run or the one it resumes: what a checkpoint says.
    [[nodiscard]] std::uint64_t records_done() const { return std::max(m_records, m_resume_point); }
    // Whether the record `ahead` places after the last one counted is one
    // the run this one resumes did (a worker's outcome not yet routed).
    [[nodiscard]] bool done_before(std::uint64_t ahead) const {
        return m_records + ahead < m_resume_point;
    }

    // How many records the whole input holds, judged from `block` (the
    // first) holding `records` and the inputs' size: what a command sizes
    // its tables by once, instead of growing them. nullopt when the size is
    // not known (a pipe) or the block says nothing.
    [[nodiscard]] std::optional<std::uint64_t> expected_records(const InputBlock& block,
                                                                std::size_t records) const {
        auto total = m_input->total_bytes();
        auto block_bytes = block.block.lines().size();
        if (!total || block_bytes == 0 || records == 0) return std::nullopt;
        return static_cast<std::uint64_t>(static_cast<double>(*total) /
                                          static_cast<double>(block_bytes) *
                                          static_cast<double>(records));
    }

    // Where a line of the block being routed lies in the input.
    [[nodiscard]] InputRecord locate(const InputBlock& block, const io::BlockLine& line) const {
        return m_positions.locate(block, line);
    }

    // The reject file has everything set aside so far (at the end of a run).
    void flush_rejects();

    // Records whose event time lies outside --since/--until: counted, not
    // routed. With a window, a summary states them ("outside_range"), so
    // that in = out + side outputs + rejected + outside_range.
    [[nodiscard]] std::uint64_t outside_range() const { return m_outside_range; }
    void add_window_count(std::vector<std::pair<std::string, std::uint64_t>>& counts) const {
        if (m_window_active) counts.emplace_back("outside_range", m_outside_range);
    }

protected:
    // Counts one record; false when the run this one resumes did it.
    bool count_record() {
        ++m_records;
        if (m_records == m_crash_at_record) crash_now();
        if (m_records == m_interrupt_at_record) std::raise(SIGINT);
        if (m_records % k_progress_every == 0) report_progress();
        return m_records > m_resume_point;
    }
    void report_progress();
    // Sets aside a line too long to hold, found whole in a block.
    void reject_too_long(InputRecord& record);

    io::Diagnostics& m_diagnostics;
    PositionTracker m_positions;
    std::uint64_t m_max_record_bytes;
    std::size_t m_threads;
    bool m_busy_ordered_stage;
    std::size_t m_block_bytes;
    std::chrono::milliseconds m_idle_interval;
    record::PathCensus m_census;
    const std::atomic<int>* m_interrupt;              // RecordRunSetup::interrupt
    std::uint64_t m_crash_at_record = crash_record(); // a test's crash point (IDEM_CRASH_AT)
    std::uint64_t m_interrupt_at_record = interrupt_record(); // ... or its Ctrl-C
    std::optional<std::uint64_t> m_total_bytes;               // the inputs' size, for progress
    bool m_window_active = false;                             // --since/--until given
    std::uint64_t m_outside_range = 0;
    bool m_total_bytes_known = false; // ... asked once, at the first report

private:
    io::Sink* m_rejects_to = nullptr;
    std::optional<RejectRouter> m_rejects;
    std::optional<InputStream> m_input;
    std::uint64_t m_records = 0;
    std::uint64_t m_resume_point = 0;
};

// A worker's --since/--until step, for a record it has timed: true when the
// record goes on; else its outcome is outside_range (the frame counts it),
// or `reject(why)` set it aside, having no event time to place.
template <typename Outcome, typename Reject>
bool placed_in_window(const record::TimeWindow& window, const record::EventTime& time,
                      Outcome& outcome, Reject&& reject) {
    switch (record::place(window, time)) {
    case record::Placement::inside:
        return true;
    case record::Placement::outside:
        outcome.kind = Outcome::Kind::outside_range;
        return false;
    case record::Placement::untimed:
        reject(std::string(record::k_untimed_in_window));
        return false;
    }
    return false;
}

template <typename State, typename Result> class RecordRun : public RecordRunFrame {
public:
    using Outcome = typename decltype(Result::outcomes)::value_type;

    // The subcommand's steps besides routing. Only `judge` is required.
    struct Steps {
        // On a worker thread: judges every line of the block into `result`.
        std::function<void(const InputBlock&, State&, Result&)> judge;
        // On the calling thread, before the block's records are routed (to
        // look up the whole block in a store in one call).
        std::function<void(const InputBlock&, Result&)> prepare;
        // On the calling thread, for each record the run this one resumes
        // did (it is not routed again): for what a command builds from the
        // whole input at its end (dedup --counts).
        std::function<void(const Outcome&, const InputRecord&)> resumed;
        // After a block's records are routed, even when routing threw: the
        // block's memory is reused next (records written from it in place
        // must be out by then).
        std::function<void()> release_block;
        // After a block: how many of its records this run did (not the
        // resumed run). Runs before the frame decides whether to commit.
        std::function<void(std::uint64_t new_records)> block_done;
        // Live input gone quiet: the time to flush and act on the wall clock.
        std::function<void()> idle;
        // The run's commit: its outputs, then its state, its checkpoint
        // and the store's commit (store::OwnedOutputs::commit keeps that
        // order). The frame calls it after a block once `commit_every`
        // records this run did have been routed since the last commit
        // (--batch), or when `commit_due` says so, and when an input
        // fails (InputError), so that what was read before the failure
        // stands; the failure then goes on. The last commit, once the
        // input ends, is the command's own (its checkpoint is finished).
        std::function<void()> commit;
        std::uint64_t commit_every = 0; // 0: only when commit_due says so
        std::function<bool()> commit_due;
    };

    RecordRun(const RecordRunSetup& setup, io::Diagnostics& diagnostics)
        : RecordRunFrame(setup, diagnostics) {}

    // Reads every input through the steps, one State per worker thread
    // (parsers and prepared keys are not shared). `route(outcome, record,
    // index)` runs on the calling thread for each record in input order,
    // except the ones a resumed run skips, lines too long to hold and
    // lines that are not one JSON object (the frame rejects those, with the
    // column and why); `index` is the outcome's place in its block. (A
    // template, not a std::function: it runs once per record.) An input
    // that fails (InputError) is thrown after what was read before it is
    // routed.
    template <typename Route>
    void run(std::vector<std::unique_ptr<State>>& states, const Steps& steps, Route&& route) {
        m_commit = steps.commit;
        try {
            run_block_pipeline<State, Result>(
                input(), states, steps.judge,
                [&](const InputBlock& block, Result& result) { emit(block, result, steps, route); },
                steps.idle, m_idle_interval, m_block_bytes, caller_helps());
        } catch (const InputError&) {
            commit();
            throw;
        }
    }

    // Records this run routed since the last commit.
    [[nodiscard]] std::uint64_t records_since_commit() const { return m_since_commit; }
    // Commits now, through Steps::commit (an idle step's flush, say).
    void commit() {
        m_since_commit = 0;
        if (m_commit) m_commit();
    }

    // One State per worker, each made by `make`.
    template <typename Make> [[nodiscard]] std::vector<std::unique_ptr<State>> states(Make make) {
        std::vector<std::unique_ptr<State>> made;
        // A reader that inflates gzip is a core's work as much as an ordered
        // stage is: on 2 cores a .gz run with a worker fewer took 0.94 of
        // the time it took with two. A zstd reader is not: there one worker
        // fewer took 1.04 of the time (docs/records.md).
        bool busy = m_busy_ordered_stage || input().decoding_takes_a_core();
        auto count = worker_count(m_threads, busy) + (caller_helps() ? 1 : 0);
        for (std::size_t i = 0; i < count; ++i) {
            made.push_back(make());
            if constexpr (requires { made.back()->parser.report_paths_to(&m_census); })
                made.back()->parser.report_paths_to(&m_census);
        }
        return made;
    }

private:
    // An Outcome that carries its parse failure (parse_line's kind, column
    // and message) is rejected here, never routed; one that keeps its
    // failures apart (reorder's) routes them itself.
    static constexpr bool k_frame_rejects_unparsed = requires(Outcome outcome) {
        Outcome::Kind::failed_to_parse;
        outcome.column;
        outcome.message;
    };

    // A worker marks a record outside --since/--until by its kind, or (an
    // Outcome without kinds) by a flag.
    static bool outside_window(const Outcome& outcome) {
        if constexpr (requires { Outcome::Kind::outside_range; })
            return outcome.kind == Outcome::Kind::outside_range;
        else if constexpr (requires { outcome.outside_range; })
            return outcome.outside_range;
        else
            return false;
    }

    template <typename Route>
    void emit(const InputBlock& block, Result& result, const Steps& steps, Route& route) {
        if (!steps.release_block) {
            route_block(block, result, steps, route);
            return;
        }
        try {
            route_block(block, result, steps, route);
        } catch (...) {
            try {
                steps.release_block();
            } catch (...) {
                // the error already on its way is the one to report
            }
            throw;
        }
        steps.release_block();
    }

    template <typename Route>
    void route_block(const InputBlock& block, Result& result, const Steps& steps, Route& route) {
        m_positions.start_block(block);
        if (steps.prepare) steps.prepare(block, result);
        auto before = records();
        // Lines a file cut to the window skipped unread (--sorted): records
        // outside it, counted as a worker's outcome would have them counted.
        for (auto skipped = block.skipped_records; skipped > 0; --skipped)
            if (count_record()) ++m_outside_range;
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            auto& outcome = result.outcomes[i];
            if (!count_record()) {
                if (steps.resumed) steps.resumed(outcome, m_positions.locate(block, outcome.line));
                continue;
            }
            auto record = m_positions.locate(block, outcome.line);
            if (record.bytes.size() > m_max_record_bytes) {
                reject_too_long(record);
                continue;
            }
            if constexpr (k_frame_rejects_unparsed) {
                if (outcome.kind == Outcome::Kind::failed_to_parse) {
                    rejects().reject(record, outcome.column, outcome.message);
                    continue;
                }
            }
            if (outside_window(outcome)) {
                ++m_outside_range;
                continue;
            }
            route(outcome, record, i);
        }
        if (auto oversized = m_positions.finish_block(block, result.lines))
            if (count_record()) rejects().reject_oversized(*oversized);
        auto resumed_before = std::min(before, resume_point());
        auto resumed_after = std::min(records(), resume_point());
        auto new_records = (records() - before) - (resumed_after - resumed_before);
        if (steps.block_done) steps.block_done(new_records);
        m_since_commit += new_records;
        bool batch_full = steps.commit_every != 0 && m_since_commit >= steps.commit_every;
        if (batch_full || (steps.commit_due && steps.commit_due())) commit();
        if (m_interrupt)
            if (auto signal = m_interrupt->load(std::memory_order_relaxed))
                throw Interrupted(signal, "interrupted");
    }

    // A busy ordered stage also judges blocks while it would wait for its
    // worker (run_block_pipeline's caller_helps): states() makes one state
    // more, the calling thread's, last. Not beside a decoding reader, which
    // already takes the core the ordered stage leaves.
    [[nodiscard]] bool caller_helps() {
        return m_busy_ordered_stage && !input().decoding_takes_a_core();
    }

    std::function<void()> m_commit;
    std::uint64_t m_since_commit = 0;
};

} // namespace idem::run
