// idem replay: re-send records with stable idempotency keys (docs/replay.md).

#include "commands.hpp"
#include "common.hpp"
#include "http_flags.hpp"
#include "keys.hpp"

#include "idem/io/sink.hpp"
#include "idem/replay/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::cli {

namespace {

struct ReplayCommandOptions {
    CommonOptions common;
    KeyOptions keys;
    std::string to;
    std::string key;
    std::string key_header = "Idempotency-Key";
    bool no_key = false;
    std::string since;
    std::string until;
    std::string time_field;
    std::vector<std::string> filters;
    std::optional<std::uint64_t> limit;
    std::string store;
    std::string lock_timeout = "60s";
    std::string scope;
    bool retry_failed = false;
    bool force = false;
    std::string lease = "30s";
    std::uint32_t max_attempts = 5;
    std::string backoff = "1s..60s";
    std::string retry_budget = "10%";
    std::string max_retry_after = "5m";
    std::string rate;
    std::size_t concurrency = 8;
    std::string timeout = "connect=2s,total=30s";
    std::string resign_scheme;
    bool dry_run = false;
    replay::Timing timing = replay::Timing::as_fast_as_allowed;
    std::string speed; // "" : 1x
    std::uint64_t seed = 0;
};

// "50/s", "3000/m", "10/h", or a bare number per second.
double parse_rate(std::string_view text) {
    auto slash = text.find('/');
    auto number = text.substr(0, slash);
    double per = 1;
    if (slash != std::string_view::npos) {
        auto unit = text.substr(slash + 1);
        if (unit == "s")
            per = 1;
        else if (unit == "m")
            per = 60;
        else if (unit == "h")
            per = 3600;
        else
            throw UsageError(fmt::format("--rate: unit {} is not s, m or h", quote(unit)));
    }
    double value = 0;
    try {
        std::size_t used = 0;
        value = std::stod(std::string(number), &used);
        if (used != number.size()) value = 0;
    } catch (const std::exception&) {
    }
    if (value <= 0)
        throw UsageError(fmt::format("--rate: expected a rate such as 50/s, got {}", quote(text)));
    return value / per;
}

replay::ReplayOptions replay_options(const ReplayCommandOptions& options) {
    replay::ReplayOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    run.to = options.to;
    if (!options.key.empty() && options.no_key)
        throw UsageError("--key and --no-key contradict each other: --key chooses the "
                         "Idempotency-Key, --no-key sends none");
    if (!options.key.empty()) run.key_paths = record::FieldPath::parse_list(options.key);
    run.key_header = options.no_key ? std::string() : options.key_header;
    run.rules.key_use = options.no_key ? replay::KeyUse::without_key : replay::KeyUse::with_key;
    run.rules.max_retry_after = parse_duration(options.max_retry_after);
    if (!options.since.empty())
        run.selection.since = parse_timestamp_flag("--since", options.since);
    if (!options.until.empty())
        run.selection.until = parse_timestamp_flag("--until", options.until);
    if (!options.time_field.empty())
        run.selection.time_field = record::FieldPath::parse(options.time_field);
    for (const auto& filter : options.filters) {
        auto equals = filter.find('=');
        if (equals == std::string::npos || equals == 0)
            throw UsageError(fmt::format("--filter: expected PATH=VALUE, got {}", quote(filter)));
        run.selection.filters.emplace_back(record::FieldPath::parse(filter.substr(0, equals)),
                                           filter.substr(equals + 1));
    }
    run.selection.limit = options.limit;
    run.store_uri = options.store;
    run.lock_timeout = parse_duration(options.lock_timeout);
    run.scope = options.scope;
    if (options.force && options.retry_failed)
        throw UsageError(
            "--force already re-sends failed keys: give one of --force and --retry-failed");
    run.rerun = options.force          ? store::ReplayRerun::force
                : options.retry_failed ? store::ReplayRerun::retry_failed
                                       : store::ReplayRerun::resume;
    run.lease = parse_duration(options.lease);
    if (run.lease < std::chrono::seconds(1)) throw UsageError("--lease must be at least 1s");
    if (options.max_attempts == 0) throw UsageError("--max-attempts must be at least 1");
    run.max_attempts = options.max_attempts;
    run.backoff = replay::parse_backoff(options.backoff);
    run.retry_budget = parse_share("--retry-budget", options.retry_budget);
    if (!options.rate.empty()) run.rate_per_second = parse_rate(options.rate);
    if (options.concurrency == 0 || options.concurrency > 1024)
        throw UsageError("--concurrency must be between 1 and 1024");
    run.concurrency = options.concurrency;
    run.timeouts = parse_timeouts("--timeout", options.timeout);
    run.timing = options.timing;
    if (!options.speed.empty() && run.timing != replay::Timing::original)
        throw UsageError("--speed paces --timing original: add --timing original, or drop --speed");
    auto speed = trim(options.speed.empty() ? std::string_view("1x") : options.speed);
    if (!speed.empty() && speed.back() == 'x') speed.remove_suffix(1);
    run.speed = parse_share("--speed", speed);
    if (run.speed <= 0) throw UsageError("--speed must be above 0 (10x: ten times as fast)");
    if (!options.resign_scheme.empty()) {
        auto keys = options.keys;
        keys.scheme = options.resign_scheme;
        run.resign = key_config(keys);
    }
    run.dry_run = options.dry_run;
    run.seed = options.seed;
    return run;
}

int run_replay_command(const ReplayCommandOptions& options) {
    auto run = replay_options(options);
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    auto result = replay::run_replay(run, *output, diagnostics);
    return finish_run(options.common, diagnostics, result.summary,
                      result.failed > 0 ? static_cast<int>(ExitCode::findings) : 0);
}

} // namespace

void register_replay(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<ReplayCommandOptions>();
    auto* command = app.add_subcommand(
        "replay", "re-send records with stable idempotency keys, a ledger and safe retries");
    add_common_options(*command, options->common);
    add_fail_on_unmatched_option(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command
        ->add_option("--to", options->to, "target URL; its path, if any, replaces the captured one")
        ->required();
    command->add_option("--key", options->key,
                        "field paths of the idempotency key (default: the record's fingerprint)");
    command->add_option("--key-header", options->key_header,
                        "header carrying the key (default Idempotency-Key)");
    command->add_flag("--no-key", options->no_key,
                      "send no key; then a timeout after sending is not retried");
    command->add_option("--since", options->since, "only records received at or after this time")
        ->check(time_bound_check());
    command->add_option("--until", options->until, "only records received before this time")
        ->check(time_bound_check());
    command->add_option(
        "--time-field", options->time_field,
        "time of a plain event for --since/--until/--timing (envelopes: received_at)");
    command->add_option("--filter", options->filters, "only records where PATH=VALUE (repeatable)")
        ->allow_extra_args(false);
    command->add_option("--limit", options->limit, "send at most this many records");
    add_store_option(*command, options->store, "the ledger");
    command->add_option("--lock-timeout", options->lock_timeout,
                        "how long to wait for a SQLite ledger another process holds (default 60s)");
    command->add_option("--scope", options->scope,
                        "ledger namespace (default: the --to URL, so each target has its own)");
    command->add_flag("--retry-failed", options->retry_failed,
                      "also re-send keys that failed for good in an earlier run");
    command->add_flag("--force", options->force, "re-send completed keys too");
    command->add_option("--lease", options->lease,
                        "how long a claim holds before another run may take the key over "
                        "(default 30s; renewed while sending)");
    command->add_option("--max-attempts", options->max_attempts, "attempts per record (default 5)");
    command->add_option("--backoff", options->backoff,
                        "first..cap of the exponential backoff, full jitter (default 1s..60s)");
    command->add_option("--retry-budget", options->retry_budget,
                        "retries allowed in the run, as a share of first attempts (default 10%)");
    command->add_option("--max-retry-after", options->max_retry_after,
                        "cap on waits asked by Retry-After (default 5m)");
    command->add_option("--rate", options->rate, "at most this many requests, e.g. 50/s or 600/m");
    command->add_option("--concurrency", options->concurrency, "requests in flight (default 8)");
    command->add_option("--timeout", options->timeout,
                        "per attempt (default connect=2s,total=30s)");
    command->add_option("--resign", options->resign_scheme,
                        "sign each attempt again with this scheme (as idem sign) and --secret");
    add_key_options_as(*command, options->keys, "Re-signing (--resign)");
    command->add_flag("--dry-run", options->dry_run,
                      "print each request with its key and send nothing (the ledger is not read)");
    add_choice_option(
        *command, "--timing", options->timing,
        "asap (default) or original: keep the capture's pacing",
        {{"asap", replay::Timing::as_fast_as_allowed}, {"original", replay::Timing::original}});
    command->add_option("--speed", options->speed,
                        "with --timing original: 10x is ten times faster");
    command->add_option("--seed", options->seed, "seed of the backoff jitter (default: the clock)");
    command->footer(
        "One NDJSON line per record: key, outcome (completed, failed, skipped), attempts,\n"
        "status, latency_ms, source. Each key is claimed in the ledger before it is sent, so a\n"
        "rerun skips what completed and resends, with the same key, what a killed run left in\n"
        "progress (after its --lease). 2xx completes; 5xx, 408, 425, 429 and connection errors\n"
        "are retried with backoff (Retry-After honoured); other 4xx fail for good. Exit 1 when\n"
        "any record ended failed.\n\n"
        "Examples:\n"
        "  idem replay --to http://localhost:8080/hooks --key id events.ndjson\n"
        "  idem replay --to https://api.example.com --since 2026-11-29T00:00:00Z capture.ndjson\n"
        "  idem replay --to http://localhost:9000 --resign stripe --secret-env WHSEC "
        "capture.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_replay_command(*options); }; });
}

} // namespace idem::cli
