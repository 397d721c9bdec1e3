// idem probe: prove that a webhook handler is idempotent before production
// does (docs/probe.md).

#include "app.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "http_flags.hpp"
#include "keys.hpp"

#include "idem/io/sink.hpp"
#include "idem/probe/report.hpp"
#include "idem/probe/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <thread>

namespace idem::cli {

namespace {

struct ProbeCommandOptions {
    CommonOptions common;
    KeyOptions keys;
    std::string to;
    std::vector<std::string> templates;
    std::string key;
    std::string key_header = "Idempotency-Key";
    std::string scheme;
    std::string tolerance;
    std::size_t copies = 8;
    std::string fail_first;
    std::string schedule = "stripe";
    std::string speed = "60";
    std::string late;
    std::string clock_header;
    bool expect_payload_dedup = false;
    std::string expect;
    std::string order;
    std::string deadline;
    std::string settle = "0s";
    std::string also_to;
    std::vector<std::string> vary;
    std::string restart_cmd;
    std::string restart_timeout = "30s";
    std::vector<std::string> checks;
    std::string effects_sqlite;
    std::string effects_query;
    std::string effects_url;
    std::string effects_cmd;
    std::string effects_timeout = "5s";
    probe::ReportFormat report = probe::ReportFormat::table;
    std::string output_path;
    std::string ledger_path;
    bool wide = false;
};

std::pair<std::string, std::string> parse_header_flag(std::string_view flag,
                                                      std::string_view text) {
    auto colon = text.find(':');
    auto name = trim(text.substr(0, colon));
    if (colon == std::string_view::npos || name.empty() ||
        name.find_first_of(" \t\r\n") != std::string_view::npos)
        throw UsageError(fmt::format("{}: expected 'HEADER: VALUE', got {}", flag, quote(text)));
    auto value = trim(text.substr(colon + 1));
    if (value.find_first_of("\r\n") != std::string_view::npos)
        throw UsageError(fmt::format("{}: a header value holds no line break", flag));
    return {std::string(name), std::string(value)};
}

probe::ProbeOptions probe_options(const ProbeCommandOptions& options) {
    probe::ProbeOptions run;
    run.to = options.to;
    if (!options.templates.empty()) {
        CommonOptions templates = options.common;
        templates.inputs = options.templates;
        run.templates = input_options(templates);
        run.has_templates = true;
    }
    if (!options.key.empty()) run.key_path = record::FieldPath::parse(options.key);
    run.key_header = options.key_header;
    if (run.key_header.empty() || run.key_header.find_first_of(" \t\r\n:") != std::string::npos)
        throw UsageError("--key-header must be a header name");
    if (!options.scheme.empty()) {
        auto keys = options.keys;
        keys.scheme = options.scheme;
        run.signing = key_config(keys);
        if (run.signing->scheme == verify::Scheme::auto_detect)
            throw UsageError("--scheme auto cannot sign: name the handler's scheme");
        if (!options.tolerance.empty()) {
            run.signing->tolerance = positive_duration("--tolerance", options.tolerance);
            run.signing->tolerance_given = true;
        }
    } else if (!options.keys.secrets.empty() || !options.keys.secret_envs.empty() ||
               !options.keys.secret_files.empty()) {
        throw UsageError("--secret without --scheme: name the scheme to sign with");
    } else if (!options.tolerance.empty()) {
        throw UsageError("--tolerance is the signature's age limit: give --scheme with it");
    }
    if (options.copies < 2 || options.copies > 256)
        throw UsageError("--copies must be between 2 and 256");
    run.copies = options.copies;
    if (!options.fail_first.empty())
        run.fail_first = parse_header_flag("--fail-first", options.fail_first);
    run.schedule = probe::parse_schedule(options.schedule);
    auto speed = trim(options.speed);
    if (!speed.empty() && speed.back() == 'x') speed.remove_suffix(1);
    run.speed = parse_share("--speed", speed);
    if (run.speed <= 0) throw UsageError("--speed must be above 0 (60: a minute a second)");
    if (!options.late.empty()) {
        run.late = positive_duration("--late", options.late);
        run.late_given = true;
    }
    run.clock_header = options.clock_header;
    if (run.clock_header.find_first_of(" \t\r\n:") != std::string::npos)
        throw UsageError("--clock-header must be a header name");
    run.expect_payload_dedup = options.expect_payload_dedup;
    if (!options.expect.empty()) {
        if (options.expect != "draft")
            throw UsageError(fmt::format("--expect {}: the one standard probe judges by is "
                                         "'draft' (the IETF Idempotency-Key draft)",
                                         quote(options.expect)));
        run.expect_draft = true;
    }
    if (!options.order.empty()) run.order_path = record::FieldPath::parse(options.order);
    for (const auto& text : options.vary)
        run.vary.push_back(probe::parse_varied_field(text));
    run.restart_cmd = options.restart_cmd;
    run.restart_timeout = parse_duration(options.restart_timeout);
    if (run.restart_timeout <= Duration{0}) throw UsageError("--restart-timeout must be above 0");
    bool slack = options.scheme == "slack" || options.schedule == "slack";
    run.deadline = options.deadline.empty()
                       ? (slack ? std::chrono::seconds(3) : std::chrono::seconds(10))
                       : positive_duration("--deadline", options.deadline);
    run.settle = parse_duration(options.settle);
    if (!options.also_to.empty()) {
        // A path only: probe never sends to a host --to does not name.
        if (options.also_to.front() != '/' ||
            options.also_to.find_first_of(" \t\r\n#") != std::string::npos ||
            options.also_to.starts_with("//"))
            throw UsageError(fmt::format("--also-to {}: a path on --to's host, starting with '/' "
                                         "(never a host or a URL)",
                                         quote(options.also_to)));
        run.also_to = options.also_to;
    }
    for (const auto& list : options.checks)
        for (auto name : split(list, ','))
            run.checks.push_back(probe::parse_check(trim(name)));
    int observers = !options.effects_sqlite.empty() + !options.effects_url.empty() +
                    !options.effects_cmd.empty();
    if (observers > 1)
        throw UsageError("give one of --effects-sqlite, --effects-url and --effects-cmd");
    if (options.effects_sqlite.empty() != options.effects_query.empty())
        throw UsageError("--effects-sqlite and --effects-query go together: the database and "
                         "the query that counts a delivery's side effects");
    auto effects_timeout = positive_duration("--effects-timeout", options.effects_timeout);
    if (!options.effects_sqlite.empty())
        run.effects = probe::sqlite_observer(options.effects_sqlite, options.effects_query);
    else if (!options.effects_url.empty())
        run.effects = probe::url_observer(options.effects_url, effects_timeout);
    else if (!options.effects_cmd.empty())
        run.effects = probe::command_observer(options.effects_cmd, effects_timeout);
    run.ledger_path = options.ledger_path;
    run.pause = [](Duration wait) { std::this_thread::sleep_for(wait); };
    return run;
}

int run_probe_command(const ProbeCommandOptions& options) {
    auto run = probe_options(options);
    StderrDiagnostics diagnostics(options.common.quiet, StderrDiagnostics::RejectFlag::absent);
    auto started = std::chrono::steady_clock::now();
    // Opened before anything is sent, so a report that cannot be written is
    // known before the handler is touched; written beside the file and
    // renamed over it at the end, so a probe that fails (the handler down,
    // a refused --to) leaves the previous report as it was, never empty.
    auto output = options.output_path.empty() ? io::Sink::standard_output()
                                              : io::Sink::replace_file(options.output_path);
    auto result = probe::run_probe(run, diagnostics);
    auto width = stdout_table_width(options.wide, options.output_path.empty());
    output->write(probe::render_report(result, options.report, width, version_line()));
    output->flush();
    output->publish();
    io::Summary summary;
    summary.command = "probe";
    summary.counts = {{"checks", result.checks.size()},
                      {"passed", result.count(probe::Verdict::pass)},
                      {"failed", result.count(probe::Verdict::fail)},
                      {"warned", result.count(probe::Verdict::warn)},
                      {"skipped", result.count(probe::Verdict::skipped)},
                      {"requests", result.requests}};
    summary.facts = {{"target", result.target}, {"effects", result.effects}};
    summary.seconds = io::seconds_since(started);
    auto failed = result.count(probe::Verdict::fail) > 0;
    return finish_run(options.common, diagnostics, summary,
                      failed ? static_cast<int>(ExitCode::findings) : 0);
}

} // namespace

void register_probe(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<ProbeCommandOptions>();
    auto* command = app.add_subcommand(
        "probe", "prove a webhook handler idempotent: duplicates, concurrent copies, reused and "
                 "regenerated keys, drops, retries, forgeries, replays");
    command->add_option("--to", options->to, "the handler's URL (probe sends only here)")
        ->required();
    command->add_option("--template", options->templates,
                        "NDJSON events or envelopes to deliver (repeatable; default: a small "
                        "built-in event); each check gets its own ids");
    command->add_option("--key", options->key,
                        "the idempotency key is the event's value at PATH (made unique per "
                        "check); default: probe-<run>-<check>, and the event's id made unique");
    command->add_option("--key-header", options->key_header,
                        "the header the key goes in (default Idempotency-Key)");
    add_key_options_as(*command, options->keys, "Signing (--scheme)");
    command->add_option("--scheme", options->scheme,
                        "sign every delivery as this scheme's provider does (as idem sign), "
                        "with --secret: adds forged-signature and stale-replay");
    command->add_option("--tolerance", options->tolerance,
                        "stale-replay signs this long ago plus a minute (default: 5m)");
    command->add_option("--copies", options->copies,
                        "concurrent-duplicates: identical deliveries sent at once (default 8)");
    command->add_option("--fail-first", options->fail_first,
                        "retry-after-5xx: 'HEADER: VALUE' the handler answers 5xx to (a fault "
                        "it injects), sent on the first copy only");
    command->add_option("--schedule", options->schedule,
                        "retry-after-5xx's retry intervals: stripe (default), svix, github, "
                        "slack, or fixed:1s,2s,4s");
    command->add_option("--speed", options->speed,
                        "retry waits go this many times faster (default 60: a minute a second); "
                        "late-retry's only with --clock-header");
    command->add_option("--late", options->late,
                        "late-retry: deliver again this much later (default 6m, past a common "
                        "5-minute key TTL); real time unless --clock-header");
    command->add_option("--clock-header", options->clock_header,
                        "tell the handler the time in this header (RFC 3339), for a handler "
                        "whose clock tests may set: waits are then compressed by --speed");
    command->add_option("--expect", options->expect,
                        "draft: what the IETF Idempotency-Key draft asks fails instead of "
                        "warning (a retry of a completed request answered with another status, "
                        "a reused key refused with another 4xx than 422)");
    command->add_flag("--expect-payload-dedup", options->expect_payload_dedup,
                      "regenerated-key fails, not warns, when the same payload under a new key "
                      "acts twice");
    command->add_option("--order", options->order,
                        "out-of-order: the path that orders the --template events (sent newest "
                        "first)");
    command->add_option("--deadline", options->deadline,
                        "slow-answer: every answer within this (default 10s; 3s for slack)");
    command
        ->add_option("--vary", options->vary,
                     "PATH=attempt|now|uuid: a field set anew on every copy, as providers put an "
                     "attempt counter, the send time or a delivery id in the body (repeatable); "
                     "a handler that tells copies apart by a hash of the body then acts on each")
        ->allow_extra_args(false);
    command->add_option("--restart-cmd", options->restart_cmd,
                        "CMD: how the handler is restarted (run by /bin/sh, waited for, its "
                        "output discarded); retry-after-restart runs it between a delivery and "
                        "its retry, then asks the handler until it answers");
    command->add_option("--restart-timeout", options->restart_timeout,
                        "how long --restart-cmd and the handler's coming back may take (default "
                        "30s)");
    command->add_option("--also-to", options->also_to,
                        "PATH: another endpoint of the same handler (on --to's host and port): "
                        "other-endpoint sends the same key there and expects one side effect");
    command->add_option("--settle", options->settle,
                        "wait this long after a check's deliveries before reading its side "
                        "effects (default 0s: the handler acts before it answers)");
    command->add_option("--checks", options->checks,
                        "only these checks (comma-separated; default: all)");
    command->add_option("--effects-sqlite", options->effects_sqlite,
                        "the handler's SQLite database, opened read-only, for --effects-query");
    command->add_option("--effects-query", options->effects_query,
                        "a SELECT with :key and/or :id bound, answering a delivery's side "
                        "effects (a count)");
    command->add_option("--effects-url", options->effects_url,
                        "a GET answering a JSON count; {key} and {id} are filled in");
    command->add_option("--effects-cmd", options->effects_cmd,
                        "a command printing a count, run with IDEM_KEY and IDEM_ID set");
    command->add_option("--effects-timeout", options->effects_timeout,
                        "how long an --effects-url or --effects-cmd reading may take (default 5s)");
    add_choice_option(*command, "--report", options->report,
                      "table (default), json, markdown, or junit (a test case per check)",
                      {{"table", probe::ReportFormat::table},
                       {"json", probe::ReportFormat::json},
                       {"markdown", probe::ReportFormat::markdown},
                       {"junit", probe::ReportFormat::junit}});
    command->add_option("-o,--output", options->output_path,
                        "write the report here (default: stdout)");
    command->add_option("--ledger", options->ledger_path,
                        "write every request and answer here (NDJSON, for idem audit)");
    add_wide_option(*command, options->wide);
    add_report_options(*command, options->common);
    command->footer(
        "Each check sends deliveries under keys and ids of its own and judges the answers and,\n"
        "with --effects-*, the side effects: pass, fail, warn or skipped (with why). Exit 0 when\n"
        "none fails, 1 when one does, 2 for usage, 4 when the handler cannot be reached.\n\n"
        "Examples:\n"
        "  idem probe --to http://localhost:8000/webhooks\n"
        "  idem probe --to http://localhost:8000/hooks --scheme stripe --secret-env WHSEC \\\n"
        "    --effects-sqlite app.db --effects-query 'SELECT count(*) FROM payments WHERE "
        "idem_key = :key'\n"
        "  idem probe --to http://localhost:8000/hooks --report junit -o probe.xml");
    command->callback(
        [options, &action] { action = [options] { return run_probe_command(*options); }; });
}

} // namespace idem::cli
