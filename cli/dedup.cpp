// idem dedup: each event once, across runs and machines (docs/dedup.md).

#include "commands.hpp"
#include "common.hpp"

#include "idem/dedup/run.hpp"
#include "idem/io/sink.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/interrupt.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::cli {

namespace {
struct DedupOptions {
    CommonOptions common;
    std::string key;
    std::string ignore;
    dedup::MissingKey missing = dedup::MissingKey::reject;
    std::string time_field;
    std::string window;
    std::optional<BucketSize> bucket;
    std::string zone; // "" : UTC
    std::string ttl = "24h";
    std::uint64_t allow = 1;
    dedup::KeepCopy keep = dedup::KeepCopy::first;
    std::string max_held = "256MiB";
    bool mark = false;
    bool count = false;
    std::string dups_path;
    std::string counts_path;
    std::string output_path;
    bool fail_on_duplicate = false;
    bool resume_to_stdout = false;
    bool print_key = false;
    std::string store;
    std::string scope = "default";
    dedup::StoreFailure on_store_error = dedup::StoreFailure::fail;
    std::string lock_timeout = "60s";
    bool gc = false;
    std::size_t threads = 0;
    std::uint64_t batch = 65536;
};

int run_dedup_command(const DedupOptions& options) {
    if (options.gc) {
        print_summary(options.common, dedup::collect_garbage(options.store));
        return 0;
    }
    dedup::DedupRunOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    if (!options.key.empty()) run.key.key_paths = record::FieldPath::parse_list(options.key);
    if (!options.ignore.empty())
        run.key.ignore_paths = record::FieldPath::parse_list(options.ignore);
    if (!options.key.empty() && !options.ignore.empty())
        throw UsageError("--ignore applies to the whole event: it cannot be combined with --key");
    run.missing = options.missing;
    if (!options.time_field.empty()) run.time_field = record::FieldPath::parse(options.time_field);
    if (!options.window.empty()) {
        run.window = parse_duration(options.window);
        if (run.window.count() <= 0)
            throw UsageError(fmt::format("--window {} is empty: give a duration such as 24h",
                                         quote(options.window)));
    }
    if (!options.zone.empty() && !options.bucket)
        throw UsageError("--tz sets the zone of --bucket's calendar days and hours: add --bucket "
                         "day or --bucket hour, or drop --tz");
    run.bucket = options.bucket;
    run.zone = TimeZone::load(options.zone.empty() ? std::string("UTC") : options.zone);
    run.input.window = time_window(options.common, run.input,
                                   run.time_field ? &*run.time_field : nullptr, &run.zone);
    run.ttl = positive_duration("--ttl", options.ttl);
    // A fingerprint that expires while its window is open lets the retry
    // that comes after the TTL through: the incident of the 5-minute key.
    if (!options.window.empty() && run.ttl < run.window)
        throw UsageError(fmt::format("--ttl {} is shorter than --window {}: a fingerprint would be "
                                     "forgotten while its window is still open; make --ttl at "
                                     "least --window",
                                     options.ttl, options.window));
    if (options.allow == 0)
        throw UsageError("--allow must be at least 1 (the first copy always passes)");
    run.allow = options.allow;
    run.keep = options.keep;
    run.max_held_bytes = parse_byte_size(options.max_held);
    if (run.keep == dedup::KeepCopy::last && options.allow != 1)
        throw UsageError(
            "--keep last emits one copy of each event: it cannot be combined with --allow");
    if (options.mark && options.count)
        throw UsageError("--mark and --count are exclusive: choose one");
    run.action = options.mark    ? dedup::DuplicateAction::mark
                 : options.count ? dedup::DuplicateAction::count
                                 : dedup::DuplicateAction::drop;
    run.dups_path = options.dups_path;
    run.counts_path = options.counts_path;
    {
        // The name says the format: a .csv that holds NDJSON would be read
        // as CSV by the next tool.
        std::string_view name = run.counts_path;
        for (std::string_view compressed : {".gz", ".zst", ".xz", ".bz2"})
            if (name.ends_with(compressed)) name.remove_suffix(compressed.size());
        if (name.ends_with(".csv") || name.ends_with(".tsv"))
            throw UsageError(fmt::format("--counts writes NDJSON (one line per key): name it "
                                         ".ndjson, not {}",
                                         quote(run.counts_path)));
    }
    run.output_path = options.output_path;
    if (!run.dups_path.empty() && run.action != dedup::DuplicateAction::drop)
        throw UsageError("--dups goes with the default mode: --mark keeps duplicates in stdout, "
                         "--count writes none");
    run.print_key = options.print_key ? dedup::KeyPrinting::on : dedup::KeyPrinting::off;
    run.store_uri = options.store;
    run.scope = options.scope;
    run.lock_timeout = parse_duration(options.lock_timeout);
    run.on_store_error = options.on_store_error;
    run.threads = options.threads;
    run.batch = std::max<std::uint64_t>(options.batch, 1);
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    // Ctrl-C stops the run where it can say what it committed; a second
    // one ends it at once.
    stop_on_interrupt();
    run.interrupt = &interrupt_request();
    run.resume_to_stdout = options.resume_to_stdout;
    try {
        auto result = dedup::run_dedup(run, *output, diagnostics);
        return finish_run(options.common, diagnostics, result.summary,
                          result.duplicates > 0 && options.fail_on_duplicate ? 1 : 0);
    } catch (const Interrupted& stop) {
        print_stderr("idem dedup: {}\n", stop.what());
        return 128 + stop.signal();
    }
}
} // namespace

void register_dedup(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<DedupOptions>();
    auto* command =
        app.add_subcommand("dedup", "drop, mark or count duplicate events, remembered across runs");
    add_common_options(*command, options->common);
    add_time_window_options(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command->add_option(
        "--key", options->key,
        "comma-separated field paths that identify an event (default: the whole event)");
    command->add_option("--ignore", options->ignore,
                        "without --key: field paths left out of the whole-event fingerprint");
    add_choice_option(*command, "--missing", options->missing,
                      "a record without a key field: reject (default) or pass",
                      {{"reject", dedup::MissingKey::reject}, {"pass", dedup::MissingKey::pass}});
    command->add_option(
        "--time-field", options->time_field,
        "the event's time (default: an envelope's received_at, else when it was read)");
    command->add_option(
        "--window", options->window,
        "a repeat is a duplicate only within this long of the first copy, by event time");
    add_choice_option(
        *command, "--bucket", options->bucket,
        "fold the event's calendar day or hour into the key (business-day boundaries)",
        {{"day", BucketSize::day}, {"hour", BucketSize::hour}});
    command->add_option("--tz", options->zone,
                        "the calendar of --bucket: UTC (default), +08:00, Asia/Shanghai");
    command->add_option("--ttl", options->ttl,
                        "how long a claim lasts from the first copy (default 24h): on the "
                        "events' clock with --time-field, else on the wall clock");
    command->add_option("--allow", options->allow,
                        "copies of an event that pass before the rest are duplicates (default 1)");
    add_choice_option(
        *command, "--keep", options->keep,
        "which copy is emitted: first (default, as it arrives) or last (the newest, when its "
        "--window closes or at the end of the input)",
        {{"first", dedup::KeepCopy::first}, {"last", dedup::KeepCopy::last}});
    command->add_option("--max-held", options->max_held,
                        "--keep last holds at most this much in memory (default 256MiB)");
    command->add_flag("--mark", options->mark,
                      "pass every record, with _idem.dedup saying whether it is a duplicate");
    command->add_flag("--count", options->count, "write no records: only the summary");
    command->add_flag("--resume-to-stdout", options->resume_to_stdout,
                      "go on after a run to standard output that Ctrl-C interrupted over the "
                      "same input and store: write only the records it did not (append them "
                      "to its output with >>); without it, such a rerun is refused");
    command->add_option(
        "-o,--output", options->output_path,
        "write to FILE instead of stdout; a rerun after a crash resumes it exactly");
    command->add_option("--dups", options->dups_path,
                        "write duplicates here (annotated) instead of dropping them");
    command->add_option("--counts", options->counts_path,
                        "write one NDJSON line per key to FILE: the key as records hold it, how "
                        "many records carried it, and where and when the first and last came "
                        "(uniq -c)");
    command->add_flag("--fail-on-duplicate", options->fail_on_duplicate,
                      "exit 1 when any duplicate was seen (CI)");
    command->add_flag("--print-key", options->print_key,
                      "annotate each written record with the encoded key that was hashed");
    add_store_option(*command, options->store, "");
    command->add_option(
        "--scope", options->scope,
        "namespace of fingerprints in the store, for several streams (default 'default')");
    add_choice_option(*command, "--on-store-error", options->on_store_error,
                      "fail (default: exit 4, nothing unclaimed let through), pass (judge within "
                      "this process, counted unclaimed) or local (the same, marked degraded, and "
                      "written back to the store when it answers again)",
                      {{"fail", dedup::StoreFailure::fail},
                       {"pass", dedup::StoreFailure::pass},
                       {"local", dedup::StoreFailure::local}});
    add_lock_timeout_option(*command, options->lock_timeout);
    command->add_flag("--gc", options->gc, "delete expired fingerprints from the store, then exit");
    add_threads_option(*command, options->threads);
    command->add_option(
        "--batch", options->batch,
        "records per store transaction; a crash can repeat at most this many (default 65536)");
    command->footer(
        "First copies go to stdout byte for byte; duplicates are dropped (or go to --dups FILE).\n"
        "The store remembers fingerprints across runs: tomorrow's log still knows today's "
        "events.\n\n"
        "Examples:\n"
        "  idem dedup --key data.object.id,type events.ndjson > unique.ndjson\n"
        "  idem dedup --ignore request.id,attempt --window 24h --dups dups.ndjson < events.ndjson\n"
        "  idem dedup --key body.id --store redis://cache:6379/2 --count --fail-on-duplicate "
        "today.ndjson\n"
        "  idem dedup --key id --store :memory: --count --counts keys.ndjson day.ndjson.gz && "
        "jq -c 'select(.count > 2)' keys.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_dedup_command(*options); }; });
}

} // namespace idem::cli
