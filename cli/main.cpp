// idem: webhook and event-stream forensics. This file is the one place
// where failures become exit codes; the table of subcommands is app.cpp's.

#include "app.hpp"
#include "common.hpp"
#include "file_flags.hpp"

#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/text.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>
#include <string_view>
#include <vector>

namespace {

using idem::cli::print_stderr;

void print_error(std::string_view message) {
    // One line, whatever the message holds: a value in it (a file's name,
    // a store's path) never starts a line of its own.
    print_stderr("idem: error: {}\n", idem::terminal_text(message));
}

// "unknown command 'verfy'; did you mean 'verify'?" before CLI11 would say
// only that a subcommand is required.
std::optional<std::string> unknown_command(const CLI::App& app, int argc, char** argv) {
    if (argc < 2) return std::nullopt;
    std::string_view first = argv[1];
    std::vector<std::string> names;
    for (const auto* command : app.get_subcommands({}))
        names.push_back(command->get_name());
    if (std::find(names.begin(), names.end(), first) != names.end()) return std::nullopt;
    if (first == "-h" || first == "--help" || first == "--version") return std::nullopt;
    if (first.starts_with('-'))
        return fmt::format("unknown flag {}: a command comes first, as in 'idem verify --help'",
                           idem::quote(first));
    auto close = idem::closest_name(first, names);
    return fmt::format("unknown command {}{}", idem::quote(first),
                       close.empty() ? fmt::format("; the commands are {}", fmt::join(names, ", "))
                                     : fmt::format("; did you mean {}?", idem::quote(close)));
}

// Flags that peers' users type for one of idem's under another name: no
// spelling distance leads from "--retries" to "--max-attempts". Offered
// only where the command has the flag.
constexpr std::pair<std::string_view, std::string_view> k_flag_synonyms[] = {
    {"--retries", "--max-attempts"},    {"--max-retries", "--max-attempts"},
    {"--retry", "--max-attempts"},      {"--attempts", "--max-attempts"},
    {"--delimiter", "--csv-delimiter"}, {"--separator", "--csv-delimiter"},
    {"--sep", "--csv-delimiter"},       {"--db", "--store"},
    {"--database", "--store"},          {"--out", "--output"},
    {"--output-file", "--output"},      {"--ttl-seconds", "--ttl"},
};

// Did-you-mean hints for flags the chosen command does not have.
std::string flag_hints(const CLI::App& app) {
    std::string hints;
    for (const auto* command : app.get_subcommands()) {
        std::vector<std::string> flags;
        for (const auto* option : command->get_options())
            for (const auto& name : option->get_lnames())
                flags.push_back("--" + name);
        for (const auto& extra : command->remaining()) {
            if (!extra.starts_with("--")) continue;
            auto name = extra.substr(0, extra.find('='));
            std::string close;
            for (const auto& [typed, meant] : k_flag_synonyms)
                if (name == typed && std::find(flags.begin(), flags.end(), meant) != flags.end())
                    close = meant;
            if (close.empty()) close = idem::closest_name(name, flags);
            if (!close.empty())
                hints +=
                    fmt::format("idem: error: unknown flag {} for 'idem {}'; did you mean {}?\n",
                                idem::quote(name), command->get_name(), idem::quote(close));
        }
    }
    return hints;
}

// A usage error about a value names the flag that gave it, wherever the
// value was parsed ("--window: invalid duration '5min'"): the first quoted
// value in the message, when exactly one flag of the command was given it.
std::string naming_the_flag(const CLI::App& app, std::string message) {
    if (message.starts_with("--")) return message;
    auto open = message.find('\'');
    auto close = open == std::string::npos ? open : message.find('\'', open + 1);
    if (close == std::string::npos) return message;
    auto value = message.substr(open + 1, close - open - 1);
    std::vector<std::string> flags;
    for (const auto* command : app.get_subcommands())
        for (const auto* option : command->get_options())
            for (const auto& given : option->results())
                if (given == value && option->get_name().starts_with("--") &&
                    std::find(flags.begin(), flags.end(), option->get_name()) == flags.end())
                    flags.push_back(option->get_name());
    if (flags.size() != 1 || message.find(flags.front()) != std::string::npos) return message;
    return flags.front() + ": " + message;
}

} // namespace

int main(int argc, char** argv) {
    idem::keep_freed_memory_for_reuse();
    CLI::App app;
    std::function<int()> action;
    idem::cli::build_app(app, action);
    // Redis credentials come from the environment only: never from a URI
    // or a flag, which show in the process list (docs/stores.md).
    if (const char* password = std::getenv("IDEM_REDIS_PASSWORD"); password && *password) {
        const char* user = std::getenv("IDEM_REDIS_USER");
        idem::store::set_redis_credentials(user ? user : "", password);
    }
    // A clock for tests (docs/architecture.md, "Time"): IDEM_NOW=+2s runs
    // every "now" two seconds ahead, IDEM_NOW=2026-12-01T00:00:00Z from that
    // instant on, IDEM_NOW=@FILE by what FILE says whenever it changes; not
    // a flag, so no user meets it by accident.
    if (const char* now = std::getenv("IDEM_NOW"); now && *now) {
        try {
            if (*now == '@')
                idem::set_clock_file(now + 1);
            else
                idem::set_clock_offset(idem::parse_clock_offset(now));
        } catch (const idem::Error& error) {
            print_error(error.what());
            return 2;
        }
    }
    // A crash point for the kill tests (docs/architecture.md, "The crash
    // guarantee"): IDEM_CRASH_AT=record:N or commit:K.
    if (const char* crash = std::getenv("IDEM_CRASH_AT"); crash && *crash) {
        try {
            idem::cli::set_crash_point_from(crash);
        } catch (const idem::Error& error) {
            print_error(error.what());
            return 2;
        }
    }
    // `idem help [COMMAND]` is `idem [COMMAND] --help`, as git and cargo have it.
    std::vector<char*> help_argv;
    if (argc >= 2 && std::string_view(argv[1]) == "help") {
        static char help_flag[] = "--help";
        help_argv.push_back(argv[0]);
        if (argc >= 3) help_argv.push_back(argv[2]);
        help_argv.push_back(help_flag);
        argc = static_cast<int>(help_argv.size());
        argv = help_argv.data();
    }
    if (auto unknown = unknown_command(app, argc, argv)) {
        print_error(*unknown);
        print_stderr("Run 'idem --help' for the commands.\n");
        return static_cast<int>(idem::ExitCode::usage);
    }
    try {
        app.parse(argc, argv);
        // Before the run reads anything: no output empties an input.
        idem::cli::check_file_flags(app);
    } catch (const CLI::CallForHelp& help) {
        return app.exit(help);
    } catch (const CLI::CallForVersion& version) {
        return app.exit(version);
    } catch (const CLI::ParseError& error) {
        auto hints = flag_hints(app);
        if (hints.empty())
            print_error(error.what());
        else
            print_stderr("{}", idem::escape_for_terminal(hints));
        print_stderr("Run 'idem --help' (or 'idem COMMAND --help') for usage.\n");
        return static_cast<int>(idem::ExitCode::usage);
    } catch (const idem::Error& error) {
        print_error(error.what());
        return static_cast<int>(error.exit_code());
    }
    auto failed = [](int code) {
        idem::cli::write_failed_run_metrics(code);
        return code;
    };
    try {
        return action ? action() : static_cast<int>(idem::ExitCode::usage);
    } catch (const idem::UsageError& error) {
        std::fflush(stdout);
        print_error(naming_the_flag(app, error.what()));
        return failed(static_cast<int>(error.exit_code()));
    } catch (const idem::Error& error) {
        std::fflush(stdout);
        print_error(error.what());
        return failed(static_cast<int>(error.exit_code()));
    } catch (const std::bad_alloc&) {
        print_error("out of memory");
        return failed(static_cast<int>(idem::ExitCode::store_failure));
    } catch (const std::exception& error) {
        // Every expected failure is an idem::Error; anything else is a bug,
        // reported rather than left to std::terminate.
        print_stderr("idem: internal error: {} (please report it, with the input that caused it)\n",
                     idem::terminal_text(error.what()));
        return failed(static_cast<int>(idem::ExitCode::store_failure));
    }
}
