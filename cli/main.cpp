// idem: webhook and event-stream forensics. This file is the table of
// subcommands and the one place where failures become exit codes.

#include "commands.hpp"

#include "idem/util/errors.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

int main(int argc, char** argv) {
    CLI::App app{
        "idem: check, dedup, reorder and safely re-send webhook deliveries and event streams"};
    app.require_subcommand(1);
    app.set_version_flag("--version", "idem 0.1.0");
    app.footer("Records are NDJSON (plain events or delivery envelopes); see docs/records.md.\n"
               "Exit codes: 0 clean, 1 findings, 2 usage, 3 bad input, 4 store or I/O failure.\n"
               "Run 'idem COMMAND --help' for a command's flags and an example.");
    std::function<int()> action;
    idem::cli::register_verify(app, action);
    idem::cli::register_sign(app, action);
    idem::cli::register_dedup(app, action);
    idem::cli::register_reorder(app, action);
    idem::cli::register_audit(app, action);
    idem::cli::register_listen(app, action);
    idem::cli::register_replay(app, action);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& help) {
        return app.exit(help);
    } catch (const CLI::CallForVersion& version) {
        return app.exit(version);
    } catch (const CLI::ParseError& error) {
        fmt::print(stderr, "idem: error: {}\n", error.what());
        fmt::print(stderr, "Run 'idem --help' (or 'idem COMMAND --help') for usage.\n");
        return static_cast<int>(idem::ExitCode::usage);
    } catch (const idem::Error& error) {
        fmt::print(stderr, "idem: error: {}\n", error.what());
        return static_cast<int>(error.exit_code());
    }
    try {
        return action ? action() : static_cast<int>(idem::ExitCode::usage);
    } catch (const idem::Error& error) {
        std::fflush(stdout);
        fmt::print(stderr, "idem: error: {}\n", error.what());
        return static_cast<int>(error.exit_code());
    } catch (const std::bad_alloc&) {
        fmt::print(stderr, "idem: error: out of memory\n");
        return static_cast<int>(idem::ExitCode::store_failure);
    } catch (const std::exception& error) {
        // Every expected failure is an idem::Error; anything else is a bug,
        // reported rather than left to std::terminate.
        fmt::print(stderr,
                   "idem: internal error: {} (please report it, with the input that caused it)\n",
                   error.what());
        return static_cast<int>(idem::ExitCode::store_failure);
    }
}
