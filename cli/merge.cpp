// idem merge: coalesce events of a group within time windows (docs/merge.md).

#include "commands.hpp"
#include "common.hpp"

#include "idem/io/sink.hpp"
#include "idem/merge/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <fmt/format.h>
#include <unistd.h>

namespace idem::cli {

namespace {
struct MergeOptions {
    CommonOptions common;
    std::string rules_path;
    std::string group;
    std::string window;
    std::string every;
    std::string gap;
    std::vector<std::string> match;
    std::string agg;
    std::string action;
    std::string value_field = "value";
    std::optional<merge::Base> base;
    std::uint64_t max_count = 0;
    std::string max_span;
    std::vector<std::string> bypass;
    std::string time_field;
    std::string max_lateness;
    std::string zone;
    merge::MissingGroup missing = merge::MissingGroup::reject;
    std::uint64_t max_open = 1'000'000;
    std::string max_open_bytes = "1GiB";
    std::string output_path;
    std::string late_path;
    std::string max_future = "1d";
    bool drop_late = false;
    std::string unmatched_path;
    std::string members_path;
    bool preview = false;
    std::size_t preview_limit = 20;
    std::string store;
    std::string scope = "default";
    std::string lock_timeout = "60s";
    std::size_t threads = 0;
    std::uint64_t batch = 65536;
    bool fail_on_late = false;
};

// The one rule the flags describe (without --rules).
merge::MergeRule rule_of_flags(const MergeOptions& options) {
    merge::MergeRule rule;
    rule.name = "merge";
    for (const auto& condition : options.match)
        rule.match.push_back(merge::parse_condition(condition));
    if (options.group.empty())
        throw UsageError("give --group FIELDS (what makes records the same group), or --rules "
                         "FILE");
    rule.group = record::FieldPath::parse_list(options.group);
    if (!options.gap.empty()) {
        if (!options.window.empty() || !options.every.empty())
            throw UsageError("--gap makes session windows: it goes without --window and --every");
        rule.window.kind = merge::WindowKind::session;
        rule.window.gap = positive_duration("--gap", options.gap);
    } else {
        if (options.window.empty())
            throw UsageError("give --window 5m (tumbling; --every for sliding) or --gap 5m "
                             "(session)");
        rule.window.size = positive_duration("--window", options.window);
        if (!options.every.empty()) {
            rule.window.kind = merge::WindowKind::sliding;
            rule.window.every = positive_duration("--every", options.every);
        }
    }
    if (!options.agg.empty()) rule.aggregates = merge::parse_aggregates(options.agg);
    if (!options.action.empty()) merge::apply_action(rule, options.action, options.value_field);
    if (options.base) rule.base = *options.base;
    rule.max_count = options.max_count;
    if (!options.max_span.empty())
        rule.max_span = positive_duration("--max-span", options.max_span);
    merge::validate(rule);
    return rule;
}

int run_merge_command(const MergeOptions& options) {
    merge::MergeRunOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    if (!options.rules_path.empty()) {
        for (const auto* flag : {&options.group, &options.window, &options.every, &options.gap,
                                 &options.agg, &options.action, &options.max_span})
            if (!flag->empty() || options.base)
                throw UsageError("--rules FILE says how each rule groups, windows and merges: "
                                 "leave out --group, --window, --every, --gap, --agg, --action, "
                                 "--base and --max-span");
        if (!options.match.empty() || options.max_count > 0)
            throw UsageError("--rules FILE says what each rule matches and its max_count: leave "
                             "out --match and --max-count");
        run.rules = merge::parse_rules_file(options.rules_path);
    } else {
        run.rules.push_back(rule_of_flags(options));
    }
    for (const auto& condition : options.bypass)
        run.bypass.push_back(merge::parse_condition(condition));
    if (!options.time_field.empty()) run.time_field = record::FieldPath::parse(options.time_field);
    if (!options.max_lateness.empty()) run.max_lateness = parse_duration(options.max_lateness);
    run.max_future = positive_duration("--max-future", options.max_future);
    run.now = now_utc();
    if (!options.zone.empty()) run.zone = TimeZone::load(options.zone);
    run.input.window =
        time_window(options.common, run.input, run.time_field ? &*run.time_field : nullptr,
                    run.zone ? &*run.zone : nullptr);
    run.missing = options.missing;
    if (options.max_open == 0) throw UsageError("--max-open must be at least 1");
    run.max_open = options.max_open;
    run.max_open_bytes = parse_byte_size(options.max_open_bytes);
    if (run.max_open_bytes == 0) throw UsageError("--max-open-bytes must be more than 0");
    run.output_path = options.output_path;
    run.late_path = options.late_path;
    run.drop_late = options.drop_late;
    if (options.drop_late && !options.late_path.empty())
        throw UsageError("--late FILE keeps late records, --drop-late drops them: give one");
    run.unmatched_path = options.unmatched_path;
    run.members_path = options.members_path;
    run.preview = options.preview;
    run.preview_limit = options.preview_limit;
    if (options.preview && !options.output_path.empty())
        throw UsageError("--preview writes no merged output: it goes without -o");
    bool to_terminal = options.output_path.empty() && ::isatty(STDOUT_FILENO) != 0;
    run.preview_format = to_terminal ? merge::PreviewFormat::table : merge::PreviewFormat::ndjson;
    run.store_uri = options.store;
    run.scope = options.scope;
    run.lock_timeout = parse_duration(options.lock_timeout);
    run.threads = options.threads;
    run.batch = std::max<std::uint64_t>(options.batch, 1);
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    auto result = merge::run_merge(run, *output, diagnostics);
    return finish_run(options.common, diagnostics, result.summary,
                      options.fail_on_late && result.late > 0 ? 1 : 0);
}
} // namespace

// Whole on purpose: one statement per flag, in the order --help and the
// man page list them (tools/docgen.cpp walks the same app), so the
// function reads as that table.
void register_merge(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<MergeOptions>();
    auto* command = app.add_subcommand(
        "merge", "coalesce a group's records within a time window into one (notifications, "
                 "metrics)");
    add_common_options(*command, options->common);
    add_time_window_options(*command, options->common);
    add_fail_on_unmatched_option(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command->add_option("--rules", options->rules_path,
                        "several rules in one pass, from a YAML or JSON file (docs/merge.md)");
    command->add_option("--group", options->group,
                        "comma-separated field paths: records with the same values merge");
    command->add_option("--window", options->window,
                        "tumbling windows this long (5m), aligned to the epoch or --tz");
    command->add_option("--every", options->every,
                        "with --window: sliding windows, one starting this often");
    command->add_option("--gap", options->gap,
                        "session windows: a group's window closes after this much quiet");
    command
        ->add_option("--match", options->match,
                     "FIELD=VALUE or FIELD: merge only records that match (repeatable; others "
                     "pass through)")
        ->allow_extra_args(false); // one value per --match: the inputs follow
    command->add_option("--agg", options->agg,
                        "fields of the merged record: OUT=FUNC(FIELD),... with first, last, "
                        "append, concat, sum, avg, min, max, count(), distinct; FIELD . is the "
                        "whole event");
    command
        ->add_option("--action", options->action,
                     "the seed's names: merge_content (append every event), average (avg of "
                     "--value), overwrite (the last member), aggregate (--agg)")
        ->check(CLI::IsMember({"merge_content", "append", "average", "overwrite", "aggregate"}));
    command->add_option("--value", options->value_field,
                        "the field --action average averages (default value)");
    add_choice_option(*command, "--base", options->base,
                      "the rest of the merged record: the first member (default) or the last",
                      {{"first", merge::Base::first}, {"last", merge::Base::last}});
    command->add_option("--max-count", options->max_count,
                        "a window with this many members closes at once (a count trigger)");
    command->add_option("--max-span", options->max_span,
                        "with --gap: a session closes once it spans this long");
    command
        ->add_option("--bypass", options->bypass,
                     "FIELD=VALUE or FIELD: such records pass at once, unmerged, annotated "
                     "(critical messages; repeatable)")
        ->allow_extra_args(false);
    command->add_option("--time-field", options->time_field,
                        "the event time (default: an envelope's received_at, else when read)");
    command->add_option("--max-lateness", options->max_lateness,
                        "how far behind the latest event time a record may arrive and still "
                        "join its window (default 0)");
    command->add_option("--tz", options->zone,
                        "align windows to this zone's clock: UTC (default), +08:00, "
                        "Europe/Paris");
    add_choice_option(
        *command, "--missing", options->missing,
        "a record without a group field: reject (default) or pass it through",
        {{"reject", merge::MissingGroup::reject}, {"pass", merge::MissingGroup::pass}});
    command->add_option("--max-open", options->max_open,
                        "open windows held at most (default 1000000): past it the run stops "
                        "(exit 3)");
    command->add_option("--max-open-bytes", options->max_open_bytes,
                        "bytes the open windows may hold (default 1GiB; peak RSS stays within "
                        "2x this + 50 MB): past it the run stops (exit 3)");
    command->add_option(
        "-o,--output", options->output_path,
        "write to FILE instead of stdout; with a store, a rerun after a crash resumes it exactly");
    command->add_option("--late", options->late_path,
                        "records whose window had closed, annotated with why (default: into the "
                        "output as a window of their own, marked _idem.merge.late)");
    command->add_option("--max-future", options->max_future,
                        "a record timed further than this ahead of the clock is rejected: it "
                        "would close every window (default 1d)");
    command->add_flag("--drop-late", options->drop_late,
                      "drop records whose window had closed, a warning each (they are counted)");
    command->add_option("--unmatched", options->unmatched_path,
                        "records no rule matched (default: passed through to the output)");
    command->add_option("--members", options->members_path,
                        "every merged record's members, each with the id it went into");
    command->add_flag("--preview", options->preview,
                      "merge nothing: show groups that would merge, with their members and "
                      "result (a table on a terminal, NDJSON otherwise)");
    command->add_option("--preview-limit", options->preview_limit,
                        "how many groups --preview shows (default 20)");
    command->add_flag("--fail-on-late", options->fail_on_late, "exit 1 when a record was late");
    add_store_option(*command, options->store, "with -o: where open windows are checkpointed");
    command->add_option("--scope", options->scope,
                        "namespace of the checkpoint in the store (default 'default')");
    add_lock_timeout_option(*command, options->lock_timeout);
    add_threads_option(*command, options->threads);
    command->add_option("--batch", options->batch,
                        "with -o: records per checkpoint (default 65536)");
    command->footer(
        "One record per closed window and group, in close order, with _idem.merge saying which\n"
        "records went into it; records no rule matches pass through. The summary gives the\n"
        "drop rate (records merged away / in), per rule.\n\n"
        "Examples:\n"
        "  idem merge --group user_id,alert_type --window 5m --action merge_content alerts.ndjson\n"
        "  idem merge --group device_id,metric_name --window 1m --agg 'value=avg(value),n=count()' "
        "--time-field ts metrics.ndjson\n"
        "  idem merge --rules merge.yaml --bypass priority=critical --late late.ndjson -o "
        "out.ndjson "
        "events.ndjson\n"
        "  idem merge --rules merge.yaml --preview events.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_merge_command(*options); }; });
}

} // namespace idem::cli
