// idem reconcile: where events were lost or multiplied between stages, and
// the list to send again (docs/reconcile.md).

#include "commands.hpp"
#include "common.hpp"

#include "idem/io/sink.hpp"
#include "idem/reconcile/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <fmt/format.h>
#include <set>

namespace idem::cli {

namespace {
struct ReconcileOptions {
    CommonOptions common;
    std::vector<std::string> stages;
    std::vector<std::string> keys;
    std::vector<std::string> times;
    std::vector<std::string> payloads;
    std::vector<std::string> queries;
    std::vector<std::string> by;
    std::string grace = "15m";
    std::string sla;
    reconcile::ReportFormat report = reconcile::ReportFormat::table;
    std::string output_path;
    bool wide = false;
    std::string missing_path;
    std::string traces_path;
    std::size_t examples = 20;
    std::vector<std::string> fail_on;
    std::string max_loss;
    std::string max_duplicate_ratio;
    std::size_t threads = 0;
    std::vector<std::string> filters;
    std::string store;
    std::string scope;
    std::string remember;
    std::string lock_timeout = "60s";
    std::uint64_t spill_after = 2'000'000;
    std::string spill_dir;
};

// "NAME=VALUE" -> {NAME, VALUE}; a bare VALUE applies to every stage.
std::pair<std::string, std::string> named(const std::string& text) {
    auto equals = text.find('=');
    if (equals == std::string::npos) return {"", text};
    return {text.substr(0, equals), text.substr(equals + 1)};
}

// "0.1%" or "0.001" -> 0.001.
double fraction(std::string_view flag, std::string text) {
    bool percent = !text.empty() && text.back() == '%';
    if (percent) text.pop_back();
    double value = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || value < 0)
        throw UsageError(fmt::format("{} {} is not a rate (0.1% or 0.001)", flag, quote(text)));
    // "5" meant as 5% would pass a loss of 8%: a ratio above 1 says which.
    if (!percent && value > 1)
        throw UsageError(fmt::format("{} {}: {} would be {}%: write {}% or {}", flag, quote(text),
                                     text, value * 100, text, value / 100));
    if (percent && value > 100)
        throw UsageError(fmt::format("{} {}: a rate is at most 100%", flag, quote(text)));
    return percent ? value / 100 : value;
}

// A flag given per stage, NAME=VALUE, or VALUE for every stage.
struct PerStage {
    std::string flag;
    std::string every;
    std::map<std::string, std::string> by_stage;

    [[nodiscard]] const std::string& of(const std::string& stage) const {
        auto found = by_stage.find(stage);
        return found == by_stage.end() ? every : found->second;
    }

    // A typo'd stage name is an error, not a flag that silently applies
    // to no stage.
    void check_stages(const std::set<std::string>& names) const {
        for (const auto& [stage, value] : by_stage)
            if (!names.count(stage))
                throw UsageError(
                    fmt::format("{} {}=...: no stage is named {}", flag, stage, quote(stage)));
    }
};

// `every_allowed` false: each value must name its stage (--query NAME=SQL).
PerStage per_stage(std::string flag, const std::vector<std::string>& texts,
                   bool every_allowed = true, std::string_view shape = {}) {
    PerStage values{std::move(flag), {}, {}};
    for (const auto& text : texts) {
        auto [stage, value] = named(text);
        if (stage.empty() && !every_allowed)
            throw UsageError(fmt::format("{} {} is not {}", values.flag, quote(text), shape));
        (stage.empty() ? values.every : values.by_stage[stage]) = value;
    }
    return values;
}

// The stages in flow order, each with its key, time, payload, query and
// --by, from --stage NAME=FILE and the per-stage flags.
std::vector<reconcile::StageInput> stages_of(const ReconcileOptions& options) {
    if (!options.common.inputs.empty())
        throw UsageError("reconcile reads its stages from --stage NAME=FILE, in flow order");
    if (options.stages.size() < 2)
        throw UsageError("give at least two --stage NAME=FILE, in flow order (sent, received, "
                         "processed...)");
    if (options.stages.size() > reconcile::k_max_stages)
        throw UsageError(fmt::format("at most {} stages", reconcile::k_max_stages));
    auto by = per_stage("--by", options.by);
    auto queries = per_stage("--query", options.queries, false, "NAME=SQL");
    auto keys = per_stage("--key", options.keys);
    auto times = per_stage("--time", options.times);
    auto payloads = per_stage("--payload", options.payloads);
    std::set<std::string> names;
    for (const auto& text : options.stages)
        names.insert(named(text).first);
    for (const auto* values : {&keys, &by, &queries, &payloads, &times})
        values->check_stages(names);

    std::vector<reconcile::StageInput> stages;
    for (const auto& text : options.stages) {
        auto [name, path] = named(text);
        if (name.empty() || path.empty())
            throw UsageError(fmt::format("--stage {} is not NAME=FILE", quote(text)));
        for (const auto& earlier : stages)
            if (earlier.name == name)
                throw UsageError(fmt::format("two stages are named {}", quote(name)));
        reconcile::StageInput stage;
        stage.name = name;
        stage.path = path;
        if (path.starts_with("span:")) {
            // A stage of a trace: its spans of this name; the key is the trace id.
            stage.span = path.substr(5);
            if (stage.span.empty() || options.traces_path.empty())
                throw UsageError(fmt::format("--stage {}=span:NAME reads spans from --traces FILE "
                                             "(OTLP JSON): give both",
                                             name));
            stage.key = record::FieldPath::parse("traceId");
            stages.push_back(std::move(stage));
            continue;
        }
        const auto& key = keys.of(name);
        if (key.empty())
            throw UsageError(fmt::format("stage {} has no key: give --key PATH (every stage) or "
                                         "--key {}=PATH",
                                         quote(name), name));
        stage.key = record::FieldPath::parse(key);
        if (const auto& time = times.of(name); !time.empty())
            stage.time = record::FieldPath::parse(time);
        if (const auto& payload = payloads.of(name); !payload.empty())
            stage.payload = record::FieldPath::parse_list(payload);
        stage.query = queries.of(name);
        // A folder (--recursive) or a pattern is the stage's files in
        // order, as every command's inputs are; a database is one file.
        if (stage.query.empty()) stage.files = expanded_inputs(options.common, {path});
        if (const auto& path_by = by.of(name); !path_by.empty())
            stage.by = record::FieldPath::parse(path_by);
        stages.push_back(std::move(stage));
    }
    return stages;
}

// --missing FILE and its --filter PATH=VALUE.
void add_missing_options(const ReconcileOptions& options, reconcile::ReconcileRunOptions& run) {
    run.missing_path = options.missing_path;
    for (const auto& filter : options.filters) {
        auto equals = filter.find('=');
        if (equals == std::string::npos || equals == 0)
            throw UsageError(fmt::format("--filter: expected PATH=VALUE, got {}", quote(filter)));
        run.missing_filters.emplace_back(record::FieldPath::parse(filter.substr(0, equals)),
                                         filter.substr(equals + 1));
    }
    if (!run.missing_filters.empty() && run.missing_path.empty())
        throw UsageError("--filter narrows the --missing file: give --missing FILE too");
}

// T+1: --store, --scope, --remember.
void add_store_options(const ReconcileOptions& options, reconcile::ReconcileRunOptions& run) {
    run.store_uri = options.store;
    if (!options.scope.empty()) {
        run.scope = options.scope;
    } else {
        // One flow, one scope: the stage names in order.
        for (const auto& stage : run.stages)
            run.scope += (run.scope.empty() ? "" : ">") + stage.name;
    }
    if (!options.scope.empty() && options.store.empty())
        throw UsageError("--scope names the flow's pending keys in a --store: give --store too");
    if (!options.remember.empty()) {
        if (options.store.empty())
            throw UsageError("--remember keeps settled keys in a --store: give --store too");
        run.remember = parse_duration(options.remember);
        if (run.remember.count() < 0)
            throw UsageError(fmt::format("--remember {}: give a duration (7d; 0 for none)",
                                         quote(options.remember)));
    }
    run.lock_timeout = parse_duration(options.lock_timeout);
}

reconcile::ReconcileRunOptions run_options_of(const ReconcileOptions& options) {
    reconcile::ReconcileRunOptions run;
    run.stages = stages_of(options);
    run.input = input_options(options.common);
    run.reject_path = options.common.reject_path;
    run.strictness = strictness(options.common);
    run.threads = options.threads;
    run.grace = parse_duration(options.grace);
    if (!options.sla.empty()) run.sla = parse_duration(options.sla);
    run.examples = options.examples;
    run.report = options.report;
    run.table_width = stdout_table_width(options.wide, options.output_path.empty());
    add_missing_options(options, run);
    run.traces_path = options.traces_path;
    add_store_options(options, run);
    run.spill_after = options.spill_after;
    if (!options.spill_dir.empty()) run.spill_directory = options.spill_dir;
    if (!run.traces_path.empty() &&
        std::none_of(run.stages.begin(), run.stages.end(),
                     [](const auto& stage) { return !stage.span.empty(); }))
        throw UsageError("--traces is read for stages given as NAME=span:SPAN_NAME: none is");
    return run;
}

// A judging command exits 1 on what it finds (docs/exit-codes.md): every
// finding by default; --fail-on narrows (none: never), and --max-loss or
// --max-duplicate-ratio set the bar instead.
struct FailRule {
    std::vector<reconcile::Finding> findings;
    bool unmatched = false;
    std::optional<double> max_loss, max_duplicates;
};

FailRule fail_rule_of(const ReconcileOptions& options) {
    FailRule rule;
    auto every_finding = [&] {
        for (std::size_t i = 0; i < reconcile::k_finding_kinds; ++i)
            rule.findings.push_back(static_cast<reconcile::Finding>(i));
    };
    for (const auto& list : options.fail_on)
        for (auto name : split(list, ',')) {
            if (name == "unmatched") {
                rule.unmatched = true;
                continue;
            }
            if (name == "none") continue;
            if (name == "any") {
                every_finding();
                continue;
            }
            auto finding = reconcile::parse_finding(name);
            if (!finding)
                throw UsageError(fmt::format("--fail-on: unknown finding {} (any, none, lost, "
                                             "duplicated, late, orphan, changed, unmatched)",
                                             quote(name)));
            rule.findings.push_back(*finding);
        }
    if (!options.max_loss.empty()) rule.max_loss = fraction("--max-loss", options.max_loss);
    if (!options.max_duplicate_ratio.empty())
        rule.max_duplicates = fraction("--max-duplicate-ratio", options.max_duplicate_ratio);
    if (options.fail_on.empty() && !rule.max_loss && !rule.max_duplicates) every_finding();
    return rule;
}

// Whether the run fails its rule; each bar a hop or stage is over is said.
bool fails(const FailRule& rule, const reconcile::ReconcileResult& result,
           io::Diagnostics& diagnostics) {
    const auto& reconciliation = result.reconciliation;
    bool fails = false;
    for (auto finding : rule.findings)
        if (reconciliation.counts[static_cast<std::size_t>(finding)] > 0) fails = true;
    for (const auto& hop : reconciliation.hops)
        if (rule.max_loss && hop.loss_rate > *rule.max_loss) {
            diagnostics.warning({}, fmt::format("{} -> {} lost {:.4f}% of its keys, above "
                                                "--max-loss {:.4f}%",
                                                hop.from, hop.to, hop.loss_rate * 100,
                                                *rule.max_loss * 100));
            fails = true;
        }
    for (const auto& stage : reconciliation.stages)
        if (rule.max_duplicates && stage.duplicate_ratio > *rule.max_duplicates) {
            diagnostics.warning({}, fmt::format("{} has {:.4f}% extra copies, above "
                                                "--max-duplicate-ratio {:.4f}%",
                                                stage.name, stage.duplicate_ratio * 100,
                                                *rule.max_duplicates * 100));
            fails = true;
        }
    if (rule.unmatched && result.summary.count("unmatched_values") > 0) fails = true;
    return fails;
}

int run_reconcile_command(const ReconcileOptions& options) {
    auto run = run_options_of(options);
    auto rule = fail_rule_of(options);
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = options.output_path.empty() ? io::Sink::standard_output()
                                              : io::Sink::replace_file(options.output_path);
    auto result = reconcile::run_reconcile(run, *output, diagnostics);
    output->publish();
    return finish_run(options.common, diagnostics, result.summary,
                      fails(rule, result, diagnostics) ? 1 : 0);
}

} // namespace

// Whole on purpose: one statement per flag, in the order --help and the
// man page list them (tools/docgen.cpp walks the same app), so the
// function reads as that table.
void register_reconcile(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<ReconcileOptions>();
    auto* command = app.add_subcommand(
        "reconcile", "where events were lost or multiplied between stages, and the list to "
                     "send again");
    add_common_options(*command, options->common);
    command
        ->add_option("--stage", options->stages,
                     "NAME=FILE, in flow order (repeat): NDJSON or envelopes, .har, .csv, a JSON "
                     "array / {\"data\": [...]} export, or a SQLite database with --query")
        ->allow_extra_args(false);
    command
        ->add_option("--key", options->keys,
                     "field path of the event's key in every stage, or NAME=PATH for one stage")
        ->allow_extra_args(false);
    command
        ->add_option("--time", options->times,
                     "field path of the event time (default: an envelope's received_at), or "
                     "NAME=PATH for one stage")
        ->allow_extra_args(false);
    command
        ->add_option("--payload", options->payloads,
                     "field paths compared between stages (changed), in every stage or "
                     "NAME=PATHS for one; without it payloads are not compared")
        ->allow_extra_args(false);
    command
        ->add_option("--query", options->queries,
                     "NAME=SQL: the stage's FILE is a SQLite database, and its records the rows "
                     "of this query (the app's own table)")
        ->allow_extra_args(false);
    command
        ->add_option("--by", options->by,
                     "field path of a source or partition: losses per value of it, in every stage "
                     "or NAME=PATH for one")
        ->allow_extra_args(false);
    command->add_option("--grace", options->grace,
                        "absent from the next stage this long after (event time) is lost; "
                        "sooner is pending (default 15m)");
    command->add_option("--sla", options->sla,
                        "a hop slower than this (first copy to first copy) is late");
    add_choice_option(*command, "--report,--format", options->report,
                      "table (default), json, markdown, or html (the funnel and latency drawn); "
                      "--format is the same",
                      {{"table", reconcile::ReportFormat::table},
                       {"json", reconcile::ReportFormat::json},
                       {"markdown", reconcile::ReportFormat::markdown},
                       {"html", reconcile::ReportFormat::html}});
    command->add_option("-o,--output", options->output_path,
                        "write the report to FILE (whole or not at all)");
    add_wide_option(*command, options->wide);
    command->add_option("--missing", options->missing_path,
                        "lost events, each once, as the first stage that has them recorded "
                        "them: what `idem replay` sends again");
    command
        ->add_option("--filter", options->filters,
                     "only lost events where PATH=VALUE go to --missing (repeatable, all must "
                     "hold), e.g. type=invoice.paid")
        ->allow_extra_args(false);
    command->add_option("--traces", options->traces_path,
                        "OpenTelemetry traces (OTLP JSON, the collector's file exporter): stages "
                        "given as NAME=span:SPAN_NAME read their spans from it, keyed by trace id");
    command->add_option("--examples", options->examples,
                        "keys the report shows per finding (default 20)");
    command
        ->add_option("--fail-on", options->fail_on,
                     "findings that make the exit 1: any (default, unless --max-loss or "
                     "--max-duplicate-ratio sets the bar), none, or lost,duplicated,late,orphan,"
                     "changed,unmatched")
        ->allow_extra_args(false);
    command->add_option("--max-loss", options->max_loss,
                        "exit 1 when a hop loses more than this (0.1% or 0.001)");
    command->add_option("--max-duplicate-ratio", options->max_duplicate_ratio,
                        "exit 1 when a stage holds more extra copies than this");
    command->add_option("--store", options->store,
                        "T+1: keep the keys still within --grace at the end in this store (PATH "
                        "to SQLite, redis://host:port), and match them in the next run; each "
                        "loss is then reported once");
    command->add_option("--remember", options->remember,
                        "with --store: remember the keys each run settled this long (default 7d; "
                        "0: not), so a key seen again in a later run is 'duplicated (first "
                        "processed DATE)', and one seen only downstream an orphan only when no "
                        "earlier run saw it upstream");
    command->add_option("--scope", options->scope,
                        "the flow's name in the --store (default: the stage names, a>b>c)");
    add_lock_timeout_option(*command, options->lock_timeout);
    command->add_option("--spill-after", options->spill_after,
                        "keys held in memory before they go to partition files and are judged a "
                        "partition at a time (default 2000000; 0: never)");
    command->add_option("--spill-dir", options->spill_dir,
                        "where the partition files go (default: the temporary directory)");
    add_threads_option(*command, options->threads);
    command->footer(
        "Per key: which stages saw it, how often, when. Findings: lost (in a stage, absent from\n"
        "the next past --grace), duplicated, late (over --sla), orphan (in a later stage only),\n"
        "changed (another payload between stages).\n\n"
        "Examples:\n"
        "  idem reconcile --stage sent=stripe-events.json --stage received=capture.ndjson --key "
        "sent=id --key received=body.id\n"
        "  idem reconcile --stage received=capture.ndjson --stage processed=app.log --key id "
        "--time received=received_at --time processed=ts --missing lost.ndjson\n"
        "  idem reconcile --stage a=a.ndjson --stage b=b.ndjson --key id --max-loss 0.1% "
        "--report json\n"
        "  idem reconcile --stage sent=sent-$(date +%F).ndjson --stage processed=app-$(date "
        "+%F).log --key id --store reconcile.db   # daily, T+1");
    command->callback(
        [options, &action] { action = [options] { return run_reconcile_command(*options); }; });
}

} // namespace idem::cli
