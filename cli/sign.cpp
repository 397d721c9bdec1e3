// idem sign: add a scheme's signature headers to envelopes (docs/sign.md).

#include "commands.hpp"
#include "common.hpp"
#include "keys.hpp"

#include "idem/io/sink.hpp"
#include "idem/util/time.hpp"
#include "idem/verify/run.hpp"

namespace idem::cli {

namespace {
struct SignOptions {
    CommonOptions common;
    KeyOptions keys;
    std::string timestamp;
};

int run_sign_command(const SignOptions& options) {
    verify::SignRunOptions run;
    run.input = input_options(options.common);
    run.strictness = strictness(options.common);
    run.reject_path = options.common.reject_path;
    run.config = key_config(options.keys);
    if (!options.timestamp.empty())
        run.timestamp = parse_timestamp_flag("--timestamp", options.timestamp);
    StderrDiagnostics diagnostics(options.common.quiet);
    auto output = io::Sink::standard_output();
    auto result = verify::run_sign(run, *output, diagnostics);
    return finish_run(options.common, diagnostics, result.summary, 0);
}
} // namespace

void register_sign(CLI::App& app, std::function<int()>& action) {
    auto options = std::make_shared<SignOptions>();
    auto* command =
        app.add_subcommand("sign", "add signature headers to envelopes (fixtures, re-sending)");
    add_common_options(*command, options->common);
    add_key_options(*command, options->keys);
    // The verifier's wording ("auto: from the headers") means nothing here:
    // there are no signature headers yet to tell the scheme from.
    command->get_option("--scheme")
        ->description("github, stripe, slack, standard, svix, shopify, discord, twilio, square, "
                      "pagerduty or hmac (required: what to sign for)");
    command->add_option("--timestamp", options->timestamp, "sign as of this time (default: now)");
    command->footer(
        "Adds or replaces a scheme's signature headers on each envelope, as its provider would\n"
        "have sent them, with a fresh timestamp unless --timestamp is given. A plain event\n"
        "becomes an envelope whose body is the event's exact bytes; received_at is dropped.\n\n"
        "Example:\n"
        "  idem sign --scheme stripe --secret whsec_test events.ndjson \\\n"
        "    | idem verify --scheme stripe --secret whsec_test");
    command->callback(
        [options, &action] { action = [options] { return run_sign_command(*options); }; });
}

} // namespace idem::cli
