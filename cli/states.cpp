// idem states: check status streams against a state machine and versions
// (docs/states.md).

#include "commands.hpp"
#include "common.hpp"

#include "idem/io/sink.hpp"
#include "idem/order/order_key.hpp"
#include "idem/states/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::cli {

namespace {
struct StatesOptions {
    CommonOptions common;
    std::string entity;
    std::string state;
    std::string event;
    std::string machine_path;
    std::string allow;
    std::vector<std::string> initial;
    std::vector<std::string> final;
    bool learn = false;
    std::string version_field;
    std::string seq;
    std::string order_time;
    std::string hlc_field;
    std::int64_t first_version = 1;
    std::size_t window = 100;
    std::string max_lateness;
    std::string time_field;
    std::string stuck_after;
    std::string output_path;
    bool wide = false;
    std::string invalid_path;
    std::string report;
    std::string format;
    std::size_t worst = 10;
    std::vector<std::string> fail_on;
    std::string store;
    std::string scope = "default";
    std::string lock_timeout = "60s";
    std::size_t threads = 0;
    // Each commit saves every entity that changed: rarer than dedup's.
    std::uint64_t batch = 1'000'000;
};

states::ReportFormat report_format(const std::string& name) {
    using states::ReportFormat;
    if (name == "table") return ReportFormat::table;
    if (name == "json") return ReportFormat::json;
    if (name == "markdown") return ReportFormat::markdown;
    if (name == "html") return ReportFormat::html;
    if (name == "dot") return ReportFormat::dot;
    if (name == "mermaid") return ReportFormat::mermaid;
    throw UsageError(fmt::format("unknown report format {} (table, json, markdown, html, dot, "
                                 "mermaid)",
                                 quote(name)));
}

// --fail-on: which findings make the exit 1 (default any).
bool fails_on_findings(const std::vector<std::string>& fail_on,
                       const std::array<std::uint64_t, states::k_finding_kinds>& findings) {
    std::vector<std::string> names = fail_on.empty() ? std::vector<std::string>{"any"} : fail_on;
    for (const auto& list : names)
        for (auto name : split(list, ',')) {
            if (name == "none") continue;
            if (name == "any") {
                for (auto count : findings)
                    if (count > 0) return true;
                continue;
            }
            auto finding = states::parse_finding(name);
            if (!finding)
                throw UsageError(fmt::format("--fail-on: unknown finding {} (any, none, illegal, "
                                             "repeated, unknown-state, bad-start, "
                                             "version-conflict, version-gap, stale, stuck, "
                                             "after-final)",
                                             quote(name)));
            if (findings[static_cast<std::size_t>(*finding)] > 0) return true;
        }
    return false;
}

int run_states_command(const StatesOptions& options) {
    states::StatesRunOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    if (options.entity.empty() || options.state.empty())
        throw UsageError("give --entity PATH (whose state it is) and --state PATH (the state)");
    run.entity_field = record::FieldPath::parse(options.entity);
    run.state_field = record::FieldPath::parse(options.state);
    if (!options.event.empty()) run.operation_field = record::FieldPath::parse(options.event);
    run.learn = options.learn;
    if (options.learn) {
        if (!options.machine_path.empty() || !options.allow.empty())
            throw UsageError("--learn prints the machine a log shows: it goes without --machine "
                             "and --allow");
    } else if (!options.machine_path.empty()) {
        if (!options.allow.empty() || !options.initial.empty() || !options.final.empty())
            throw UsageError("--machine FILE says everything: leave out --allow, --initial and "
                             "--final");
        run.machine = states::parse_machine_file(options.machine_path);
    } else if (!options.allow.empty()) {
        run.machine = states::parse_allow(options.allow, options.initial, options.final);
    } else {
        throw UsageError("give --machine FILE or --allow 'a>b,b>c' (or --learn to see the "
                         "machine a log shows)");
    }
    int orders = !options.version_field.empty() + !options.seq.empty() +
                 !options.order_time.empty() + !options.hlc_field.empty();
    if (orders > 1)
        throw UsageError("order by one of --version-field, --seq, --order-time, --hlc-field");
    if (!options.version_field.empty() || !options.seq.empty()) {
        run.order_by = states::OrderBy::version;
        run.order_field = record::FieldPath::parse(
            options.version_field.empty() ? options.seq : options.version_field);
    } else if (!options.order_time.empty()) {
        run.order_by = states::OrderBy::time;
        run.order_field = record::FieldPath::parse(options.order_time);
    } else if (!options.hlc_field.empty()) {
        run.order_by = states::OrderBy::hlc;
        run.order_field = record::FieldPath::parse(options.hlc_field);
    }
    if (!options.max_lateness.empty()) {
        if (run.order_by == states::OrderBy::arrival)
            throw UsageError("--max-lateness puts events back in order: give --version-field, "
                             "--order-time or --hlc-field");
        run.max_lateness = parse_duration(options.max_lateness);
    }
    if (options.window == 0) throw UsageError("--window must be at least 1");
    run.window = options.window;
    if (options.first_version < 0 || options.first_version > order::k_last_sequence)
        throw UsageError(fmt::format("--first-version {}: versions are integers from 0 to 2^63-2",
                                     options.first_version));
    run.first_version = options.first_version;
    if (!options.time_field.empty()) run.time_field = record::FieldPath::parse(options.time_field);
    run.input.window = time_window(options.common, run.input,
                                   run.time_field ? &*run.time_field : nullptr, nullptr);
    if (!options.stuck_after.empty()) run.stuck_after = parse_duration(options.stuck_after);
    run.output_path = options.output_path;
    run.invalid_path = options.invalid_path;
    if (!options.report.empty() && !options.format.empty() && options.report != options.format)
        throw UsageError("--report and --format name the same thing: give one");
    auto format = options.report.empty() ? options.format : options.report;
    if (!format.empty()) {
        run.report = report_format(format);
        run.table_width = stdout_table_width(options.wide, options.output_path.empty());
        if (!options.invalid_path.empty())
            throw UsageError("--invalid goes with annotated records, not with a report");
    }
    run.worst = options.worst;
    run.store_uri = options.store;
    run.scope = options.scope;
    run.lock_timeout = parse_duration(options.lock_timeout);
    run.threads = options.threads;
    run.batch = std::max<std::uint64_t>(options.batch, 1);
    (void)fails_on_findings(options.fail_on, {}); // a typo in --fail-on fails before the run
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    auto result = states::run_states(run, *output, diagnostics);
    return finish_run(options.common, diagnostics, result.summary,
                      !options.learn && fails_on_findings(options.fail_on, result.findings) ? 1
                                                                                            : 0);
}
} // namespace

void register_states(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<StatesOptions>();
    auto* command = app.add_subcommand(
        "states", "check status streams against a state machine and versions: illegal "
                  "transitions, repeats, lost updates, gaps, stuck entities");
    add_common_options(*command, options->common);
    add_time_window_options(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command->add_option("--entity", options->entity, "field path of what has the state (order_id)");
    command->add_option("--state", options->state, "field path of the state (status)");
    command->add_option("--event", options->event,
                        "field path of the operation (confirm, refund), for transitions "
                        "labelled by operation");
    command->add_option("--machine", options->machine_path,
                        "the machine: a YAML or JSON file (states, initial, final, transitions)");
    command->add_option("--allow", options->allow,
                        "the machine inline: 'pending>paid,pending>cancelled,paid>refunded'");
    command->add_option("--initial", options->initial, "with --allow: where entities start")
        ->allow_extra_args(false);
    command->add_option("--final", options->final, "with --allow: where entities end")
        ->allow_extra_args(false);
    command->add_flag("--learn", options->learn,
                      "print the machine the log shows (every transition, with counts)");
    command->add_option("--version-field", options->version_field,
                        "field path of the entity's version: events are put in version order; "
                        "skipped versions, stale and conflicting ones are findings");
    command->add_option("--seq", options->seq, "the same as --version-field");
    command->add_option("--order-time", options->order_time,
                        "field path of a time to order each entity's events by");
    command->add_option("--hlc-field", options->hlc_field,
                        "field path of a hybrid logical clock stamp (<physical>.<logical>)");
    command->add_option("--first-version", options->first_version,
                        "the version an entity the store does not know starts at (default 1)");
    command->add_option("--window", options->window,
                        "events held per entity while an earlier one is missing (default 100)");
    command->add_option("--max-lateness", options->max_lateness,
                        "how long (event time) a missing or late event is waited for (default 0)");
    command->add_option("--time-field", options->time_field,
                        "the event time (default: an envelope's received_at, else when read)");
    command->add_option("--stuck-after", options->stuck_after,
                        "an entity not in a final state this long before the last event is stuck");
    command->add_option(
        "-o,--output", options->output_path,
        "write to FILE instead of stdout; a rerun after a crash resumes it exactly");
    command->add_option("--invalid", options->invalid_path,
                        "records with a finding go here (annotated) instead of the output");
    command->add_option("--report", options->report,
                        "a report instead of records: table, json, markdown, html, or the "
                        "machine with what the log did as dot or mermaid");
    command->add_option("--format", options->format, "the same as --report");
    add_wide_option(*command, options->wide);
    command->add_option("--worst", options->worst,
                        "how many entities the report shows with their findings (default 10)");
    command
        ->add_option("--fail-on", options->fail_on,
                     "findings that make the exit 1: any (default), none, or a list "
                     "(illegal,version-conflict,...)")
        ->allow_extra_args(false);
    add_store_option(*command, options->store, "where each entity's state persists between runs");
    command->add_option("--scope", options->scope,
                        "namespace of the entities in the store (default 'default')");
    add_lock_timeout_option(*command, options->lock_timeout);
    add_threads_option(*command, options->threads, /*busy_ordered_stage=*/true);
    command->add_option("--batch", options->batch,
                        "records per store transaction (default 1000000): without -o, a crash "
                        "can judge at most this many again");
    command->footer(
        "Each record passes through with _idem.states (entity, from, to, verdict); --report\n"
        "gives counts, the worst entities and the transitions seen instead.\n\n"
        "Examples:\n"
        "  idem states --entity order_id --state status --machine orders.yaml orders.ndjson\n"
        "  idem states --entity id --state status --allow 'pending>paid,paid>shipped' --store "
        ":memory: log.ndjson\n"
        "  idem states --entity order_id --state status --version-field version --max-lateness "
        "30s --machine orders.yaml --report html > report.html orders.ndjson\n"
        "  idem states --entity order_id --state status --learn orders.ndjson > orders.yaml");
    command->callback(
        [options, &action] { action = [options] { return run_states_command(*options); }; });
}

} // namespace idem::cli
