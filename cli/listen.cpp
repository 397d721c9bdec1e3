// idem listen: capture HTTP deliveries as envelopes (docs/listen.md).

#include "commands.hpp"
#include "common.hpp"
#include "http_flags.hpp"
#include "keys.hpp"

#include "idem/listen/run.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <csignal>
#include <fmt/format.h>

namespace idem::cli {

namespace {

struct ListenCommandOptions {
    CommonOptions common;
    KeyOptions keys;
    std::string verify_scheme;
    std::string tolerance = "5m";
    std::string bind = "127.0.0.1";
    int port = 8080;
    std::string out = "-";
    std::string max_body = "10MiB";
    std::string max_head = "64KiB";
    std::string header_timeout = "10s";
    std::string idle_timeout = "60s";
    std::size_t max_connections = 16384;
    bool tell_sender_why = false;
    std::string metrics_listen; // [HOST:]PORT
    bool trace_ids = false;
    int respond = 200;
    std::string fail_rate = "0";
    int fail_status = 500;
    std::string drop_rate = "0";
    std::string delay = "0s";
    std::string retry_after;
    std::uint64_t seed = 1;
    bool dedup = false;
    std::string key;
    std::string ignore;
    std::string store;
    std::string scope = "default";
    std::string ttl = "24h";
    listen::LiveDedup::OnStoreError on_store_error = listen::LiveDedup::OnStoreError::unavailable;
    std::string forward_to;
    std::string forward_timeout = "connect=2s,total=30s";
};

std::atomic<bool> g_stop{false};

extern "C" void request_stop(int) {
    g_stop.store(true);
}

int status_flag(std::string_view flag, int status) {
    if (status < 200 || status > 599)
        throw UsageError(
            fmt::format("{}: {} is not an HTTP status between 200 and 599", flag, status));
    return status;
}

listen::ListenOptions listen_options(const ListenCommandOptions& options) {
    listen::ListenOptions run;
    run.bind_address = options.bind;
    if (options.port < 0 || options.port > 65535)
        throw UsageError(fmt::format("--port: {} is not a TCP port: use 1 to 65535, or 0 for any "
                                     "free port",
                                     options.port));
    run.port = options.port;
    run.out_path = options.out;
    run.limits.max_body_bytes = parse_byte_size(options.max_body);
    run.limits.max_head_bytes = static_cast<std::size_t>(parse_byte_size(options.max_head));
    run.limits.header_timeout = parse_duration(options.header_timeout);
    run.limits.idle_timeout = parse_duration(options.idle_timeout);
    run.limits.max_connections = options.max_connections;
    if (run.limits.max_connections == 0) throw UsageError("--max-connections must be at least 1");
    if (!options.verify_scheme.empty()) {
        auto keys = options.keys;
        keys.scheme = options.verify_scheme;
        run.verify = key_config(keys);
        run.verify->tolerance = parse_duration(options.tolerance);
        // Checked now: a missing key found at the first request would fail it with a 500.
        if (run.verify->secrets.empty() && run.verify->public_keys.empty())
            throw UsageError(fmt::format("--verify {} needs a secret (--secret, --secret-file, "
                                         "--secret-env) or an ed25519 --public-key",
                                         options.verify_scheme));
    }
    run.flaky.answer_status = status_flag("--respond", options.respond);
    run.flaky.fail_rate = parse_probability("--fail-rate", options.fail_rate);
    run.flaky.fail_status = status_flag("--fail-status", options.fail_status);
    run.flaky.drop_rate = parse_probability("--drop-connection-rate", options.drop_rate);
    run.flaky.delay = parse_duration(options.delay);
    if (!options.retry_after.empty()) run.flaky.retry_after = parse_duration(options.retry_after);
    run.flaky.seed = options.seed;
    if (options.dedup) {
        listen::LiveDedup dedup;
        if (!options.key.empty()) dedup.key.key_paths = record::FieldPath::parse_list(options.key);
        if (!options.ignore.empty())
            dedup.key.ignore_paths = record::FieldPath::parse_list(options.ignore);
        dedup.store_uri = options.store;
        dedup.scope = options.scope;
        dedup.ttl = parse_duration(options.ttl);
        dedup.on_store_error = options.on_store_error;
        run.dedup = std::move(dedup);
    } else if (!options.key.empty() || !options.ignore.empty() ||
               options.on_store_error != listen::LiveDedup::OnStoreError::unavailable) {
        throw UsageError("--key, --ignore and --on-store-error are about what --dedup compares "
                         "and keeps: add --dedup");
    }
    run.forward_to = options.forward_to;
    run.tell_sender_why = options.tell_sender_why;
    run.trace_ids = options.trace_ids;
    if (!options.metrics_listen.empty()) {
        // [HOST:]PORT; an IPv6 host in brackets. Loopback unless a host is named.
        const auto& text = options.metrics_listen;
        auto colon = text.rfind(':');
        std::string host = colon == std::string::npos ? "127.0.0.1" : text.substr(0, colon);
        if (host.size() >= 2 && host.front() == '[' && host.back() == ']')
            host = host.substr(1, host.size() - 2);
        auto port_text = colon == std::string::npos ? text : text.substr(colon + 1);
        int port = -1;
        auto [end, error] =
            std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
        if (host.empty() || error != std::errc{} || end != port_text.data() + port_text.size() ||
            port < 0 || port > 65535)
            throw UsageError(fmt::format("--metrics-listen {} is not [HOST:]PORT (e.g. "
                                         "127.0.0.1:9464; 0 for any free port)",
                                         quote(text)));
        if (port != 0 && port == options.port && host == options.bind)
            throw UsageError("--metrics-listen must not be the capture's address: metrics are "
                             "never captured as deliveries");
        run.metrics_address = host;
        run.metrics_port = port;
    }
    run.forward_timeouts = parse_timeouts("--forward-timeout", options.forward_timeout);
    return run;
}

int run_listen_command(const ListenCommandOptions& options) {
    auto run = listen_options(options);
    // A sender waits on the store: a request gets 503 after a second of
    // outage, not ten.
    apply_store_timeout(options.common, std::chrono::milliseconds(1000));
    StderrDiagnostics diagnostics(options.common.quiet, StderrDiagnostics::RejectFlag::absent);
    struct sigaction action {};
    action.sa_handler = request_stop;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
    // A capture pipe whose reader went away must fail a write (answered 503,
    // reported), not kill the listener without a word.
    std::signal(SIGPIPE, SIG_IGN);
    auto result = listen::run_listen(
        run, g_stop, diagnostics,
        [&](int port) {
            // Scripts wait for this line (and read the port from it with --port 0).
            print_stderr("idem listen: capturing http://{}:{} to {}\n", options.bind, port,
                         options.out == "-" ? "stdout" : terminal_text(options.out));
        },
        [&](int port) {
            print_stderr("idem listen: metrics at http://{}:{}/metrics\n", run.metrics_address,
                         port);
        });
    diagnostics.report_hidden();
    print_summary(options.common, result.summary);
    int code = result.failed_writes > 0 ? static_cast<int>(ExitCode::store_failure) : 0;
    write_metrics_file(options.common, result.summary, code);
    return code;
}

} // namespace

void register_listen(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<ListenCommandOptions>();
    auto* command = app.add_subcommand(
        "listen", "capture HTTP deliveries as envelopes; verify, dedup, forward live");
    command->add_option("-p,--port", options->port, "TCP port (0: any free port; default 8080)");
    command->add_option("--bind", options->bind, "address to listen on (default 127.0.0.1)");
    command->add_option("-o,--out", options->out,
                        "append envelopes to this file ('-': stdout, the default)");
    command->add_option("--verify", options->verify_scheme,
                        "check signatures with this scheme (as idem verify --scheme); "
                        "answer 401 to invalid ones, which are still captured");
    add_key_options_as(*command, options->keys, "Signatures (--verify)");
    command->add_option(
        "--tolerance", options->tolerance,
        "with --verify: how far a signed timestamp may be from arrival (default 5m)");
    command->add_flag("--dedup", options->dedup,
                      "answer duplicates 2xx without passing them on (the store idem dedup uses)");
    command->add_option("--key", options->key,
                        "with --dedup: field paths that identify a delivery, e.g. body.id or "
                        "headers.X-GitHub-Delivery (default: the whole body)");
    command->add_option("--ignore", options->ignore,
                        "with --dedup and no --key: body paths left out of the comparison");
    add_store_option(*command, options->store, "with --dedup");
    command->add_option("--scope", options->scope, "with --dedup: namespace (default 'default')");
    command->add_option("--ttl", options->ttl,
                        "with --dedup: how long a delivery is remembered (default 24h)");
    using OnStoreError = listen::LiveDedup::OnStoreError;
    add_choice_option(*command, "--on-store-error", options->on_store_error,
                      "with --dedup, when the store fails: unavailable (default: answer 503 with "
                      "Retry-After) or local (judge in this process, marked degraded, written "
                      "back when the store answers)",
                      {{"unavailable", OnStoreError::unavailable}, {"local", OnStoreError::local}});
    command->add_option("--forward-to", options->forward_to,
                        "pass accepted deliveries on to this URL and answer with its status");
    command->add_option("--forward-timeout", options->forward_timeout,
                        "for --forward-to (default connect=2s,total=30s)");
    command->add_option("--max-body", options->max_body,
                        "larger bodies are answered 413 (default 10MiB)");
    command->add_option("--max-header-size", options->max_head,
                        "larger request heads are answered 431 (default 64KiB)");
    command->add_option("--header-timeout", options->header_timeout,
                        "a request head must arrive within this (default 10s; then 408)");
    command->add_option("--idle-timeout", options->idle_timeout,
                        "close a keep-alive connection silent this long (default 60s)");
    command->add_option("--max-connections", options->max_connections,
                        "open connections; at the cap the longest idle one is closed, and only "
                        "when all are mid-request is a new one answered 503 (default 16384)");
    command->add_option("--metrics-listen", options->metrics_listen,
                        "[HOST:]PORT: serve Prometheus/OpenMetrics counters and a latency "
                        "histogram at /metrics on a socket of their own (HOST default 127.0.0.1)");
    command->add_flag("--trace-ids", options->trace_ids,
                      "start a W3C trace for deliveries that carry no valid traceparent (it is "
                      "in _idem.trace and goes on with --forward-to)");
    command->add_flag("--tell-sender-why", options->tell_sender_why,
                      "with --verify: say in the 401 body why a signature failed (local "
                      "development only: it helps a forger)");
    command->add_option("--respond", options->respond, "status of a normal answer (default 200)");
    command->add_option("--fail-rate", options->fail_rate,
                        "answer this share of requests with --fail-status (0.2 or 20%)");
    command->add_option("--fail-status", options->fail_status,
                        "status of a failed answer (default 500)");
    command->add_option("--drop-connection-rate", options->drop_rate,
                        "close this share of connections without answering");
    command->add_option("--delay", options->delay, "wait this long before each answer");
    command->add_option("--retry-after", options->retry_after,
                        "send Retry-After (in seconds) with every non-2xx answer");
    command->add_option("--seed", options->seed,
                        "seed of the flaky modes: the same seed and requests, the same failures");
    add_report_options(*command, options->common);
    add_store_timeout_option(*command, options->common);
    command->footer(
        "Every request becomes one envelope line (docs/records.md): the raw body byte for\n"
        "byte, the headers in arrival order, received_at in milliseconds, the sender's address\n"
        "and a capture id, plus _idem.listen.status (what was answered). The line is written\n"
        "before the answer is sent, so whatever was answered 2xx is in the capture.\n"
        "SIGINT/SIGTERM stop accepting, finish requests in flight and sync the capture.\n\n"
        "Examples:\n"
        "  idem listen --port 8080 -o deliveries.ndjson\n"
        "  idem listen --port 8080 --verify stripe --secret-env STRIPE_WEBHOOK_SECRET -o "
        "in.ndjson\n"
        "  idem listen --port 9000 --fail-rate 30% --retry-after 2s --seed 7   # a flaky target\n"
        "  idem listen --port 8080 --verify github --secret-env GH_SECRET --dedup \\\n"
        "    --key headers.X-GitHub-Delivery --forward-to http://localhost:3000 -o in.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_listen_command(*options); }; });
}

} // namespace idem::cli
