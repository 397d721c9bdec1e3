#pragma once
// A command a user gave (probe's --effects-cmd, --restart-cmd) run as
// /bin/sh -c COMMAND, waited for up to a timeout and killed past it. Its
// standard output is captured (bounded) or discarded: a command that
// leaves a server running in the background must not hold idem's pipes
// or the test's.

#include "idem/util/time.hpp"

#include <string>
#include <utility>
#include <vector>

namespace idem {

struct ShellCommandResult {
    bool timed_out = false;
    int exit_code = 0;  // 128 + the signal for a command killed by one
    std::string output; // captured standard output, at most max_output bytes
};

struct ShellCommand {
    std::string command;
    // NAME=VALUE set in its environment (replacing the same names).
    std::vector<std::pair<std::string, std::string>> environment;
    Duration timeout = std::chrono::seconds(5);
    bool capture_output = true;  // else standard output goes to /dev/null
    bool discard_errors = false; // standard error to /dev/null too
    std::size_t max_output = 4096;
};

// Throws std::system_error when the shell cannot be started.
[[nodiscard]] ShellCommandResult run_shell_command(const ShellCommand& shell);

} // namespace idem
