// idem reorder: restore order per partition, report gaps (docs/reorder.md).

#include "commands.hpp"
#include "common.hpp"

#include "idem/io/sink.hpp"
#include "idem/reorder/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <fmt/format.h>

namespace idem::cli {

namespace {
struct ReorderOptions {
    CommonOptions common;
    std::string seq;
    std::string order_by;
    std::string partition;
    std::optional<std::int64_t> start;
    std::size_t window = 1000;
    std::size_t max_held = 100000;
    std::string gap_timeout;
    std::string max_lateness;
    std::string time_field;
    bool hold = false;
    std::string gaps_path;
    std::string late_path;
    std::string max_future = "1d";
    bool drop_late = false;
    std::string output_path;
    std::vector<std::string> fail_on;
    std::string store;
    std::string scope = "default";
    std::string lock_timeout = "60s";
    bool reset = false;
    bool suggest = false;
    std::size_t threads = 0;
    std::uint64_t batch = 1 << 20;
};

int run_reorder_command(const ReorderOptions& options) {
    if (options.reset) {
        print_summary(options.common, reorder::reset_reorder(options.store, options.scope));
        return 0;
    }
    if (options.seq.empty() == options.order_by.empty())
        throw UsageError("give --seq PATH (sequence numbers) or --order-by PATH (event times), "
                         "one of them");
    reorder::ReorderRunOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    auto& sequencer = run.sequencer;
    if (!options.seq.empty()) {
        run.sequence_field = record::FieldPath::parse(options.seq);
        sequencer.mode = reorder::OrderMode::sequence;
        if (!options.max_lateness.empty())
            throw UsageError("--max-lateness goes with --order-by: with --seq, --window and "
                             "--gap-timeout bound the wait");
    } else {
        run.order_by = record::FieldPath::parse(options.order_by);
        sequencer.mode = reorder::OrderMode::time;
        if (options.start) throw UsageError("--start goes with --seq: times have no first value");
        if (!options.gap_timeout.empty())
            throw UsageError("--gap-timeout goes with --seq: with --order-by, --max-lateness "
                             "bounds the wait");
        if (!options.max_lateness.empty())
            sequencer.max_lateness = parse_duration(options.max_lateness);
    }
    if (options.start && *options.start < 0) throw UsageError("--start must be 0 or more");
    sequencer.start = options.start;
    if (options.window == 0) throw UsageError("--window must be at least 1");
    if (options.max_held == 0) throw UsageError("--max-held must be at least 1");
    sequencer.window = options.window;
    sequencer.max_held = options.max_held;
    if (!options.gap_timeout.empty()) {
        sequencer.gap_timeout = positive_duration("--gap-timeout", options.gap_timeout);
    }
    if (!options.partition.empty())
        run.partition_fields = record::FieldPath::parse_list(options.partition);
    if (!options.time_field.empty()) run.time_field = record::FieldPath::parse(options.time_field);
    run.input.window = time_window(options.common, run.input,
                                   run.time_field ? &*run.time_field : nullptr, nullptr);
    run.at_end = options.hold ? reorder::AtEnd::hold : reorder::AtEnd::flush;
    run.gaps_path = options.gaps_path;
    run.late_path = options.late_path;
    run.max_future = positive_duration("--max-future", options.max_future);
    run.now = now_utc();
    run.drop_late = options.drop_late;
    if (options.drop_late && !options.late_path.empty())
        throw UsageError("--late FILE keeps late records, --drop-late drops them: give one");
    run.output_path = options.output_path;
    run.store_uri = options.store;
    run.scope = options.scope;
    run.lock_timeout = parse_duration(options.lock_timeout);
    run.threads = options.threads;
    run.batch = std::max<std::uint64_t>(options.batch, 1);
    if (options.suggest && options.order_by.empty())
        throw UsageError("--suggest measures how late records came in time: give --order-by");
    run.suggest = options.suggest;
    bool fail_on_gap = false, fail_on_late = false;
    for (const auto& item : options.fail_on)
        (item == "gap" ? fail_on_gap : fail_on_late) = true;
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    auto result = reorder::run_reorder(run, *output, diagnostics);
    return finish_run(options.common, diagnostics, result.summary,
                      (fail_on_gap && result.gaps > 0) || (fail_on_late && result.late > 0) ? 1
                                                                                            : 0);
}
} // namespace

void register_reorder(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<ReorderOptions>();
    auto* command = app.add_subcommand(
        "reorder", "put records back in order per partition, report gaps and late records");
    add_common_options(*command, options->common);
    add_time_window_options(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command->add_option("--seq", options->seq,
                        "field path of an integer sequence: release in strictly increasing order");
    command->add_option("--order-by", options->order_by,
                        "field path of an event time (RFC 3339, epoch, or HLC "
                        "<physical>.<logical>): release in time order under a watermark");
    command->add_option("--partition", options->partition,
                        "comma-separated field paths: an order of its own per partition "
                        "(default: one partition)");
    command->add_option("--start", options->start,
                        "--seq: where a partition without a checkpoint starts (default: the "
                        "smallest sequence seen while its window fills)");
    command->add_option("--window", options->window,
                        "records held per partition; when full, the lowest goes and the "
                        "sequences before it are a gap (default 1000)");
    command->add_option("--max-held", options->max_held,
                        "records held overall; beyond it, the longest-blocked partition "
                        "skips its gap (default 100000)");
    command->add_option("--gap-timeout", options->gap_timeout,
                        "--seq: skip a gap that has waited this long (by --time-field, else "
                        "the wall clock)");
    command->add_option("--time-field", options->time_field,
                        "the event time that --gap-timeout is measured in (default: the wall "
                        "clock, for live pipes)");
    command->add_option("--max-lateness", options->max_lateness,
                        "--order-by: how far behind the newest time a record may come and "
                        "still be put in order (default 0)");
    command->add_flag("--suggest", options->suggest,
                      "--order-by: the --max-lateness that would have put 99%, 99.9% and all "
                      "of the out-of-order records in order, in the summary");
    command->add_flag("--hold", options->hold,
                      "at the end, keep what is still held in the store for the next run "
                      "instead of releasing it");
    command->add_option("--gaps", options->gaps_path,
                        "write gap records here instead of into the output");
    command->add_option("--late", options->late_path,
                        "write late and duplicate records here, with the reason (default: into "
                        "the output where they came, marked _idem.late)");
    command->add_option("--max-future", options->max_future,
                        "--order-by: a record stamped further than this ahead of the clock is "
                        "rejected: it would move the watermark past every other (default 1d)");
    command->add_flag("--drop-late", options->drop_late,
                      "drop late and duplicate records, a warning each (they are counted)");
    command->add_option("-o,--output", options->output_path,
                        "write to FILE instead of stdout; a rerun after a crash resumes it "
                        "exactly");
    command
        ->add_option("--fail-on", options->fail_on,
                     "exit 1 when any gap, or any late or duplicate record, was seen (CI)")
        ->delimiter(',')
        ->allow_extra_args(false) // one value per --fail-on: the inputs follow
        ->check(CLI::IsMember({"gap", "late"}));
    add_store_option(*command, options->store, "");
    command->add_option("--scope", options->scope,
                        "namespace of checkpoints in the store, one per stream (default "
                        "'default')");
    add_lock_timeout_option(*command, options->lock_timeout);
    command->add_flag("--reset", options->reset,
                      "forget the scope's checkpoints and held records, then exit");
    add_threads_option(*command, options->threads, /*busy_ordered_stage=*/true);
    command->add_option("--batch", options->batch,
                        "records per store commit; a crash can repeat at most this many on "
                        "stdout (default 1048576)");
    command->footer(
        "Records leave byte for byte, in order per partition. A gap becomes a record\n"
        "{\"_idem\":{\"gap\":{\"partition\":...,\"from\":a,\"to\":b,\"missing\":n}}} (or goes to "
        "--gaps FILE).\n"
        "The store keeps where each partition stands, so the next run over the next chunk\n"
        "resumes without re-emitting anything.\n\n"
        "Examples:\n"
        "  idem reorder --seq seq --partition pipeline_id --window 100 events.ndjson\n"
        "  tail -f ledger.ndjson | idem reorder --seq n --partition account --gap-timeout 30s\n"
        "  idem reorder --order-by ts --max-lateness 5s --late late.ndjson < events.ndjson\n"
        "  idem reorder --seq seq --start 1 --fail-on gap --gaps gaps.ndjson ci-events.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_reorder_command(*options); }; });
}

} // namespace idem::cli
