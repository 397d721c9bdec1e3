#pragma once
// Which flags name files, and whether the run reads or writes them: one
// table (file_flags.cpp), checked once after parsing and before the run
// reads anything (io::find_path_clash): no output is an input or another
// output.

#include <CLI/CLI.hpp>

namespace idem::cli {

// For the subcommand `app` parsed: throws UsageError when an output names
// an input or another output, or --metrics names something that is not a
// regular file.
void check_file_flags(const CLI::App& app);

} // namespace idem::cli
