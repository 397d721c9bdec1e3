// idem verify: check webhook signatures (docs/verify.md).

#include "commands.hpp"
#include "common.hpp"
#include "keys.hpp"

#include "idem/io/sink.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"
#include "idem/verify/run.hpp"
#include "idem/verify/verifier.hpp"

#include <algorithm>
#include <cctype>

namespace idem::cli {

namespace {
struct VerifyOptions {
    CommonOptions common;
    KeyOptions keys;
    std::string tolerance; // "": 5m, or a provider file's own
    std::string now;
    bool ignore_timestamp = false;
    bool nonce = false;
    std::string nonce_window;
    verify::StoreFailure on_store_error = verify::StoreFailure::fail;
    bool keep_verdicts = false;
    bool explain = false;
    std::size_t explain_budget = 64;
    std::string store;
    bool drop_invalid = false;
    std::string invalid_path;
    bool no_fail = false;
    bool fail_on_any = true; // --fail-on any (true) or none
    std::size_t threads = 0;
};

// `--secret old=$OLD` reads as the secret "old=..." (every byte is the
// secret): when no delivery matched and a --secret looks labelled, say
// where labels come from. The value itself is never shown.
void warn_of_labels_in_secrets(const KeyOptions& keys, const io::Summary& summary,
                               io::Diagnostics& diagnostics) {
    if (summary.count("valid") > 0 || summary.count("invalid") == 0) return;
    for (std::size_t i = 0; i < keys.secrets.size(); ++i) {
        const auto& secret = keys.secrets[i];
        auto equals = secret.find('=');
        if (equals == std::string::npos || equals == 0 || equals > 64) continue;
        auto label = std::string_view(secret).substr(0, equals);
        bool plain_word = std::all_of(label.begin(), label.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.';
        });
        if (!plain_word) continue;
        diagnostics.warning(
            {}, fmt::format("no delivery matched, and secret #{} starts with {}: the whole value "
                            "is the secret, '=' included; labels come from --secret-env "
                            "NAME=VAR or a secret file (--secret-file NAME=PATH)",
                            i + 1, quote(fmt::format("{}=", label))));
    }
}

int run_verify_command(const VerifyOptions& options) {
    verify::VerifyRunOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    run.config = key_config(options.keys);
    if (!options.tolerance.empty()) {
        run.config.tolerance = parse_duration(options.tolerance);
        run.config.tolerance_given = true;
    }
    if (run.config.secrets.empty() && run.config.public_keys.empty())
        throw UsageError(
            "verify needs a key: --secret, --secret-file, --secret-env or --public-key");
    if (run.config.scheme != verify::Scheme::auto_detect)
        if (auto missing = verify::missing_key(run.config.scheme, run.config))
            throw UsageError(*missing);
    run.config.timestamp_check =
        options.ignore_timestamp ? verify::TimestampCheck::ignore : verify::TimestampCheck::enforce;
    if (!options.now.empty() && options.ignore_timestamp)
        throw UsageError("--now is the moment timestamps are judged at, and --ignore-timestamp "
                         "judges none: choose one");
    if (!options.now.empty()) run.now = parse_timestamp_flag("--now", options.now);
    run.invalid_routing = options.drop_invalid || !options.invalid_path.empty()
                              ? verify::InvalidRouting::divert
                              : verify::InvalidRouting::keep_in_output;
    run.invalid_path = options.invalid_path;
    run.nonce = options.nonce ? verify::NonceCheck::on : verify::NonceCheck::off;
    if (!options.nonce_window.empty()) {
        if (!options.nonce)
            throw UsageError("--nonce-window sets how long --nonce remembers a message id: add "
                             "--nonce, or drop --nonce-window");
        run.nonce_window = positive_duration("--nonce-window", options.nonce_window);
    }
    run.keep_verdicts = options.keep_verdicts;
    // The message id is what a kept verdict names the delivery by.
    run.config.nonce_capture = options.nonce || options.keep_verdicts ? verify::NonceCapture::keep
                                                                      : verify::NonceCapture::skip;
    run.store_uri = options.store;
    run.on_store_error = options.on_store_error;
    run.threads = options.threads;
    run.explain = options.explain;
    run.explain_budget = options.explain_budget;
    if (options.explain_budget == 0) throw UsageError("--explain-budget must be at least 1");
    apply_store_timeout(options.common, std::chrono::milliseconds(10000));
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    auto result = verify::run_verify(run, *output, diagnostics);
    warn_of_labels_in_secrets(options.keys, result.summary, diagnostics);
    return finish_run(options.common, diagnostics, result.summary,
                      result.findings > 0 && !options.no_fail && options.fail_on_any ? 1 : 0);
}
} // namespace

void register_verify(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<VerifyOptions>();
    auto* command =
        app.add_subcommand("verify", "check webhook signatures; exit 1 if any is invalid");
    add_common_options(*command, options->common);
    add_store_timeout_option(*command, options->common);
    add_key_options(*command, options->keys);
    command->add_option("--tolerance", options->tolerance,
                        "how far a signed timestamp may be from now (default 5m)");
    command->add_option("--now", options->now,
                        "judge timestamps as of this time (RFC 3339 or epoch)");
    command->add_flag("--ignore-timestamp", options->ignore_timestamp,
                      "do not check timestamps (archives)");
    command->add_flag("--nonce", options->nonce,
                      "reject a second delivery of the same message id (received later, within "
                      "--nonce-window), remembered in the store across runs");
    add_choice_option(
        *command, "--on-store-error", options->on_store_error,
        "fail (default: exit 4) or local (judge replays within this run from there "
        "on, marked, and write back to the store at the end)",
        {{"fail", verify::StoreFailure::fail}, {"local", verify::StoreFailure::local}});
    command->add_option("--nonce-window", options->nonce_window,
                        "how far apart in received_at a second delivery is still a replay "
                        "(default 72h: GitHub's Redeliver works for three days)");
    command->add_flag("--explain", options->explain,
                      "for each invalid delivery, try the known ways a genuine one gets broken "
                      "(body re-serialized, newline, secret prefix or encoding, scheme, clock, "
                      "URL) and say which makes it verify: _idem.verify.diagnosis");
    command->add_option("--explain-budget", options->explain_budget,
                        "verifications --explain spends per invalid delivery at most (default 64)");
    command->add_flag("--keep-verdicts", options->keep_verdicts,
                      "keep each record's verdict in the store, by file and line, for "
                      "'idem audit --verdicts'");
    add_store_option(*command, options->store, "store for --nonce and --keep-verdicts");
    command->add_flag("--drop-invalid", options->drop_invalid,
                      "keep invalid records out of stdout (into --invalid FILE when given)");
    command->add_option("--invalid", options->invalid_path,
                        "write invalid records here instead of stdout (implies --drop-invalid)");
    command->add_flag("--no-fail", options->no_fail, "exit 0 even when records are invalid");
    add_choice_option(*command, "--fail-on", options->fail_on_any,
                      "any (default: exit 1 when a delivery is invalid or replayed) or none "
                      "(the same as --no-fail)",
                      {{"any", true}, {"none", false}});
    add_threads_option(*command, options->threads);
    command->footer(
        "Each record is written to stdout with\n"
        "  \"_idem\":{\"verify\":{\"valid\":...,\"scheme\":...,\"key\":...,\"reason\":...}}\n"
        "added. Timestamps are judged as of --now, else each envelope's received_at, else the\n"
        "clock. Prefer --secret-env or --secret-file: --secret shows in the process list.\n\n"
        "Examples:\n"
        "  idem verify --scheme stripe --secret-env STRIPE_WEBHOOK_SECRET captures.ndjson\n"
        "  idem verify --secret-env old=STRIPE_OLD --secret-env new=STRIPE_NEW --invalid "
        "bad.ndjson "
        "< captures.ndjson\n"
        "  idem verify --scheme github --secret-file gh.secret --now 2026-11-29T08:00:00Z "
        "week.ndjson");
    command->callback(
        [options, &action] { action = [options] { return run_verify_command(*options); }; });
}

} // namespace idem::cli
