// idem audit: explain every duplicate (docs/audit.md).

#include "commands.hpp"
#include "common.hpp"

#include "idem/audit/run.hpp"
#include "idem/io/sink.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <filesystem>

#include <fmt/format.h>

namespace idem::cli {

namespace {
struct AuditOptions {
    CommonOptions common;
    std::string key;
    std::string fingerprint;
    std::string time_field;
    std::string source_field;
    std::string status_field;
    std::string provider;
    std::string route_field;
    std::vector<std::string> attempt_fields;
    std::string fan_out_window = "1m";
    std::string payload;
    std::string ignore;
    std::vector<std::string> volatile_fields;
    bool no_learn_volatile = false;
    std::string race_window = "1s";
    std::string ttl = "24h";
    std::string window = "24h";
    audit::ReportFormat format = audit::ReportFormat::table;
    std::vector<std::string> fail_on;
    std::string output_path;
    bool wide = false;
    std::vector<std::string> csv_paths;
    std::string sqlite_path;
    std::string sqlite_query;
    std::string store;
    std::string scope = "default";
    std::string replay_ledger;
    std::string replay_scope;
    std::string verdicts;
    std::size_t threads = 0;
    std::uint64_t spill_after = 250'000;
    std::vector<std::string> what_if;
    bool suggest = false;
    std::string spill_dir;
};

std::vector<record::FieldPath> paths(const std::string& list) {
    return list.empty() ? std::vector<record::FieldPath>{} : record::FieldPath::parse_list(list);
}

// --fail-on: "any" (the default: a judging command exits 1 on what it finds,
// docs/exit-codes.md), "none", "duplicates" (any group, the same as any),
// "conflicts" (a key reused for another payload), or cause names.
bool fails_on_causes(const std::vector<std::string>& fail_on, const audit::AuditResult& result) {
    if (fail_on.empty()) return result.groups > 0;
    for (const auto& item : fail_on) {
        if ((item == "duplicates" || item == "any") && result.groups > 0) return true;
        auto cause =
            item == "conflicts" ? std::optional(audit::Cause::key_reuse) : audit::parse_cause(item);
        if (cause && result.causes.count(*cause)) return true;
    }
    return false;
}

void check_fail_on(const std::vector<std::string>& fail_on) {
    for (const auto& item : fail_on)
        if (item != "duplicates" && item != "conflicts" && item != "any" && item != "none" &&
            !audit::parse_cause(item))
            throw UsageError(fmt::format(
                "--fail-on: unknown value {}: expected any, none, duplicates, conflicts, "
                "retry-storm, "
                "concurrent, ttl-expired, key-reuse, key-regenerated, retried-after-failure, "
                "provider-retry, replayed-delivery, tampered, re-serialized, fan-out, "
                "layered-retry or unexplained",
                quote(item)));
}

// Where the records come from: files, CSV, a query, dedup's store, and
// what other commands kept (replay's ledger, verify's verdicts).
void read_sources(const AuditOptions& options, audit::AuditRunOptions& run) {
    if (options.sqlite_path.empty() != options.sqlite_query.empty())
        throw UsageError("--sqlite FILE and --query 'SELECT ...' go together");
    run.input = input_options(options.common);
    run.csv_paths = options.csv_paths;
    run.sqlite_path = options.sqlite_path;
    run.sqlite_query = options.sqlite_query;
    run.store_uri = options.store;
    run.store_scope = options.scope;
    if (options.replay_ledger.empty() != options.replay_scope.empty())
        throw UsageError("--replay-ledger STORE and --replay-scope SCOPE go together (replay's "
                         "scope is 'replay:' and its --to URL unless it was given --scope)");
    run.replay_ledger_uri = options.replay_ledger;
    run.verdicts_uri = options.verdicts;
    run.replay_scope = options.replay_scope;
    // Only CSV, a query or a store: stdin is not read unless "-" is given.
    run.read_records =
        !options.common.inputs.empty() ||
        (options.csv_paths.empty() && options.sqlite_path.empty() && options.store.empty());
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
}

// The fields each record is read at: key, intent, time, source, status,
// route, retry layers, and what counts as the payload.
void read_fields(const AuditOptions& options, audit::AuditRunOptions& run) {
    run.key_fields = paths(options.key);
    run.fingerprint_fields = paths(options.fingerprint);
    if (!options.time_field.empty()) run.time_field = record::FieldPath::parse(options.time_field);
    if (!options.source_field.empty())
        run.source_field = record::FieldPath::parse(options.source_field);
    if (!options.status_field.empty())
        run.status_field = record::FieldPath::parse(options.status_field);
    if (!options.provider.empty()) {
        auto provider = audit::parse_provider(options.provider);
        if (!provider)
            throw UsageError(fmt::format(
                "--provider: unknown provider {}: expected stripe, svix (or standard-webhooks), "
                "shopify, github, slack or twilio",
                quote(options.provider)));
        run.provider = *provider;
    }
    if (!options.route_field.empty())
        run.route_field = record::FieldPath::parse(options.route_field);
    if (options.attempt_fields.size() > audit::k_max_layers)
        throw UsageError(
            fmt::format("--attempt-field: at most {} retry layers", audit::k_max_layers));
    for (const auto& field : options.attempt_fields) {
        run.attempt_fields.push_back(record::FieldPath::parse(field));
        run.explain.layer_names.push_back(field);
    }
    run.payload_fields = paths(options.payload);
    run.ignore_fields = paths(options.ignore);
    if (!run.payload_fields.empty() && !run.ignore_fields.empty())
        throw UsageError("--payload names what counts, --ignore what does not: give one");
    for (const auto& list : options.volatile_fields)
        for (auto& path : paths(list))
            run.volatile_fields.push_back(std::move(path));
    if (!run.payload_fields.empty() && !run.volatile_fields.empty())
        throw UsageError("--payload names exactly what counts: --volatile has nothing to take out "
                         "of it; give one");
    run.learn_per_delivery = !options.no_learn_volatile;
}

// --what-if ttl=5m,1h,24h and --what-if key=PATHS (one alternative key each).
void read_what_if(const AuditOptions& options, audit::AuditRunOptions& run) {
    for (const auto& text : options.what_if) {
        auto equals = text.find('=');
        auto name = equals == std::string::npos ? std::string() : text.substr(0, equals);
        auto value = equals == std::string::npos ? std::string() : text.substr(equals + 1);
        if (name == "ttl") {
            for (auto ttl : split(std::string_view(value), ','))
                run.what_if.ttls.push_back(positive_duration("--what-if ttl", ttl));
        } else if (name == "key" && !value.empty()) {
            if (run.what_if.keys.size() == audit::k_max_what_if_keys)
                throw UsageError(fmt::format("--what-if key=...: at most {} alternative keys",
                                             audit::k_max_what_if_keys));
            run.what_if_key_fields.push_back(paths(value));
            run.what_if.keys.push_back(value);
        } else {
            throw UsageError(fmt::format("--what-if {}: give ttl=DURATION[,DURATION...] (e.g. "
                                         "ttl=5m,1h,24h) or key=PATHS (e.g. key=data.object.id)",
                                         quote(text)));
        }
    }
    run.what_if.key_ttl = run.explain.ttl;
    run.what_if.suggest = options.suggest;
    if ((!run.what_if.ttls.empty() || run.what_if.suggest) && options.key.empty())
        throw UsageError("--what-if ttl=... and --suggest judge a dedup by key again: give --key");
}

int run_audit_command(AuditOptions options) {
    // dedup's evidence has its own field names: they are the defaults.
    if (!options.store.empty() && options.key.empty() && options.fingerprint.empty()) {
        options.key = "fingerprint";
        if (options.time_field.empty()) options.time_field = "time";
        if (options.source_field.empty()) options.source_field = "source";
    }
    if (options.key.empty() && options.fingerprint.empty())
        throw UsageError("give --key PATHS (the idempotency key) or --fingerprint PATHS (the "
                         "business intent), or both");
    check_fail_on(options.fail_on);
    audit::AuditRunOptions run;
    read_sources(options, run);
    read_fields(options, run);
    run.input.window = time_window(options.common, run.input,
                                   run.time_field ? &*run.time_field : nullptr, nullptr);
    run.explain.fan_out_window = positive_duration("--fan-out-window", options.fan_out_window);
    run.explain.race_window = positive_duration("--race-window", options.race_window);
    run.explain.ttl = positive_duration("--ttl", options.ttl);
    run.explain.window = positive_duration("--window", options.window);
    read_what_if(options, run);
    run.format = options.format;
    run.table_width = stdout_table_width(options.wide, options.output_path.empty());
    run.threads = options.threads;
    run.spill_after = options.spill_after;
    run.spill_directory = options.spill_dir.empty() ? std::filesystem::temp_directory_path()
                                                    : std::filesystem::path(options.spill_dir);
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    // A report appears whole or not at all: a killed audit never leaves half
    // of one where a script would read it.
    auto output = options.output_path.empty() ? io::Sink::standard_output()
                                              : io::Sink::replace_file(options.output_path);
    auto result = audit::run_audit(run, *output, diagnostics);
    output->publish();
    return finish_run(options.common, diagnostics, result.summary,
                      fails_on_causes(options.fail_on, result) ? 1 : 0);
}
} // namespace

// Whole on purpose: one statement per flag, in the order --help and the
// man page list them (tools/docgen.cpp walks the same app), so the
// function reads as that table.
void register_audit(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<AuditOptions>();
    auto* command = app.add_subcommand(
        "audit", "group records by idempotency key or intent, and explain every duplicate");
    add_common_options(*command, options->common);
    add_time_window_options(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command->add_option("--key", options->key,
                        "comma-separated field paths of the idempotency key");
    command->add_option("--fingerprint", options->fingerprint,
                        "field paths of the business intent (user_id,fault_type): finds the same "
                        "intent under different keys");
    command->add_option("--time-field", options->time_field,
                        "the record's time (default: an envelope's received_at)");
    command->add_option("--source-field", options->source_field,
                        "who sent it: agent instance, worker, retry layer");
    command->add_option("--status-field", options->status_field,
                        "what the receiver answered (503, \"timeout\"): a retry after a 5xx, "
                        "408, 429 or no answer is retried-after-failure (default: a capture's "
                        "_idem.listen.status)");
    command->add_option("--provider", options->provider,
                        "whose webhooks these are, when the records do not carry the provider's "
                        "headers: stripe, svix, shopify, github, slack or twilio (copies whose "
                        "waits fit its published retries are provider-retry)");
    command->add_option("--route-field", options->route_field,
                        "where each copy was delivered (an endpoint or subscription id): one "
                        "event sent to several at once is fan-out (a capture's host and path "
                        "count without it)");
    command
        ->add_option("--attempt-field", options->attempt_fields,
                     "a retry layer's attempt counter, outermost first, once per layer (up "
                     "to 4): layers that each retried multiply, reported as layered-retry")
        ->allow_extra_args(false); // one path per --attempt-field: the inputs follow
    command->add_option("--fan-out-window", options->fan_out_window,
                        "copies to several endpoints this close are one fan-out (default 1m)");
    command->add_option("--payload", options->payload,
                        "field paths that make up \"the same payload\" (default: the whole record "
                        "minus key, time and source)");
    command->add_option("--ignore", options->ignore,
                        "field paths left out of the payload (request ids, attempt counters)");
    command
        ->add_option("--volatile", options->volatile_fields,
                     "a field that differs between deliveries of one request (a delivery "
                     "counter, a receive time), beside the built-in ones (docs/audit.md); "
                     "repeatable, or PATH,PATH")
        ->allow_extra_args(false);
    command->add_flag("--no-learn-volatile", options->no_learn_volatile,
                      "compare every field as payload: learn no per-delivery field from the "
                      "log (by default a field that differs between the copies of most "
                      "retried groups, an attempt id or a worker name, is the delivery's, "
                      "and the report names it)");
    command->add_option("--race-window", options->race_window,
                        "records from different sources this close are concurrent (default 1s)");
    command
        ->add_option("--what-if", options->what_if,
                     "ttl=5m,1h,24h: judge the log again as dedup by --key with each TTL would "
                     "have: duplicates caught and missed (with examples), and the memory held; "
                     "key=PATHS: as dedup by that key would have (with --ttl), and the intents "
                     "it would have swallowed (repeat for several keys)")
        ->allow_extra_args(false);
    command->add_flag("--suggest", options->suggest,
                      "the TTL that would have caught 99%, 99.9% and every duplicate, with its "
                      "memory cost, from the delays between copies");
    command->add_option("--ttl", options->ttl,
                        "the dedup TTL: a repeat later than this under one key is ttl-expired "
                        "(default 24h)");
    command->add_option("--window", options->window,
                        "one intent is one --fingerprint within this of its first record, "
                        "and one intent under several keys within it is key-regenerated "
                        "(default 24h)");
    add_choice_option(*command, "--format,--report", options->format,
                      "table (default), json, markdown, or html (one self-contained file: a "
                      "timeline of the top groups and a sortable table); --report is the same",
                      {{"table", audit::ReportFormat::table},
                       {"json", audit::ReportFormat::json},
                       {"markdown", audit::ReportFormat::markdown},
                       {"html", audit::ReportFormat::html}});
    command
        ->add_option("--fail-on", options->fail_on,
                     "any (default: exit 1 when a record happened more than once), none, "
                     "duplicates, conflicts (a key reused for another payload) or a cause name")
        ->delimiter(',')
        ->allow_extra_args(false); // one value per --fail-on: the inputs follow
    command->add_option("-o,--output", options->output_path, "write the report to FILE");
    add_wide_option(*command, options->wide);
    command
        ->add_option("--csv", options->csv_paths,
                     "a CSV file with a header row: each row is a record (repeatable)")
        ->allow_extra_args(false);
    command->add_option("--sqlite", options->sqlite_path,
                        "a SQLite database to read records from, with --query");
    command->add_option("--query", options->sqlite_query,
                        "the SELECT whose rows are the records (column names are field names)");
    command->add_option("--store", options->store,
                        "read dedup's evidence from this idem store (SQLite file or redis://): "
                        "each copy is {fingerprint, time, source}, grouped by fingerprint");
    command->add_option("--scope", options->scope,
                        "with --store: the dedup scope to read (default 'default')");
    command->add_option("--replay-ledger", options->replay_ledger,
                        "the store replay used: each key group replay sent is shown with what "
                        "its ledger kept (state, attempts, last status)");
    command->add_option("--replay-scope", options->replay_scope,
                        "with --replay-ledger: replay's scope ('replay:' and its --to URL)");
    command->add_option("--verdicts", options->verdicts,
                        "the store 'idem verify --keep-verdicts' used: each record it checked is "
                        "shown with its verdict (by file and line)");
    command->add_option("--spill-after", options->spill_after,
                        "past this many records, group on disk in bounded memory (default 250000)");
    command->add_option("--spill-dir", options->spill_dir,
                        "where the partition files go (default: $TMPDIR or /tmp)");
    add_threads_option(*command, options->threads);
    command->footer(
        "Causes: retry-storm, concurrent, ttl-expired, key-reuse, key-regenerated,\n"
        "retried-after-failure, provider-retry (the waits fit Svix's, Slack's, Shopify's,\n"
        "Stripe's, GitHub's or Twilio's published retries), replayed-delivery (a copy\n"
        "carrying an earlier copy's signed time: no provider's retry), tampered and\n"
        "re-serialized (its signature over other bytes), fan-out (one event to several\n"
        "endpoints) and layered-retry (--attempt-field); a group that fits none is\n"
        "'unexplained'. Each comes with the records and gaps that show it.\n\n"
        "Examples:\n"
        "  idem audit --key idempotency_key --source-field worker tickets.ndjson\n"
        "  idem audit --key request.key --fingerprint user_id,fault_type --time-field ts "
        "--format markdown calls.ndjson\n"
        "  idem audit --key key --ttl 5m --fail-on conflicts,ttl-expired ci-log.ndjson\n"
        "  idem audit --key body.id captures.ndjson    # provider-retry, fan-out from headers\n"
        "  idem audit --key key --attempt-field agent_try --attempt-field http_try log.ndjson\n"
        "  idem audit --sqlite app.db --query 'SELECT * FROM work_order' --key request_key "
        "--fingerprint user_id,fault_type --time-field created_at\n"
        "  idem audit --key headers.Idempotency-Key --verdicts idem.db --replay-ledger idem.db "
        "--replay-scope replay:https://api.example/hooks capture.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_audit_command(*options); }; });
}

} // namespace idem::cli
