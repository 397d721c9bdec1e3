#pragma once
// The command line as one object: every subcommand, its flags, help and
// examples. main.cpp runs it; tools/docgen.cpp walks it to write the man
// pages and shell completions, so they never drift from --help.

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace idem::cli {

// "idem 0.2.0 (abc1234)": the version and the commit it was built from.
[[nodiscard]] std::string version_line();

// Registers every subcommand on `app`; the chosen one sets `action`.
void build_app(CLI::App& app, std::function<int()>& action);

} // namespace idem::cli
