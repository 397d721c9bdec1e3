#pragma once
// What every subcommand's flags share: inputs, rejects, --strict, the
// summary, and the stderr diagnostics a person sees.

#include "idem/io/diagnostics.hpp"
#include "idem/io/summary.hpp"
#include "idem/record/input.hpp"
#include "idem/record/rejects.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <string>
#include <vector>

namespace idem::cli {

struct CommonOptions {
    std::vector<std::string> inputs;
    std::string input_format = "ndjson";
    std::string max_record_size = "16MiB";
    std::string reject_path;
    bool strict = false;
    std::string summary_format = "text";
    bool quiet = false;
};

void add_common_options(CLI::App& command, CommonOptions& options);
// Only --summary and --quiet, for commands that read no records (listen).
void add_report_options(CLI::App& command, CommonOptions& options);

[[nodiscard]] record::InputOptions input_options(const CommonOptions& options);
[[nodiscard]] record::Strictness strictness(const CommonOptions& options);

// Prints the summary on stderr: one line, or JSON with --summary json.
void print_summary(const CommonOptions& options, const io::Summary& summary);

// Warnings to stderr (the first 20, then a count), and a progress line when
// stderr is a terminal.
class StderrDiagnostics final : public io::Diagnostics {
public:
    explicit StderrDiagnostics(bool quiet);
    ~StderrDiagnostics() override;
    void warning(const SourcePosition& where, std::string_view message) override;
    void progress(std::uint64_t records, std::uint64_t bytes) override;

private:
    bool m_quiet;
    bool m_terminal;
    std::uint64_t m_warnings = 0;
    bool m_progress_shown = false;
    std::chrono::steady_clock::time_point m_start;
    std::chrono::steady_clock::time_point m_last_progress;
};

// Reads an environment variable for a flag (the library never does).
[[nodiscard]] std::string require_env(const std::string& name, const std::string& flag);

} // namespace idem::cli
