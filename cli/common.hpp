#pragma once
// What every subcommand's flags share: inputs, rejects, --strict, the
// summary, and the stderr diagnostics a person sees.

#include "idem/io/diagnostics.hpp"
#include "idem/io/progress.hpp"
#include "idem/io/summary.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include <CLI/CLI.hpp>
#include <chrono>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::cli {

struct CommonOptions {
    std::vector<std::string> inputs;
    bool recursive = false;    // --recursive: directories among the inputs
    bool follow_links = false; // --follow-links: links out of a directory or pattern
    // The files the run writes (outputs, the SQLite store and its
    // journals), set by check_file_flags: never what a directory or
    // pattern among the inputs expands to.
    std::vector<std::string> written_files;
    run::InputFormat input_format = run::InputFormat::detect;
    std::string max_record_size = "16MiB";
    std::string reject_path;
    bool strict = false;
    bool summary_json = false; // --summary json (else text)
    bool quiet = false;
    std::string store_timeout;             // "" : the command's default
    std::string metrics_path;              // --metrics FILE
    std::vector<std::string> allow_absent; // --allow-absent PATH (PathCensus)
    bool fail_on_unmatched = false;        // --fail-on unmatched
    std::string since, until;              // --since/--until (add_time_window_options)
    bool sorted = false;                   // --sorted: the files are in event-time order
    std::string csv_delimiter;             // --csv-delimiter; empty: a comma
    bool csv_types = false;                // --csv-types
};

// Gives the command's registered options the files it writes
// (CommonOptions::written_files).
void set_written_files(std::string_view command, std::vector<std::string> files);

// Takes "unmatched" out of a command's --fail-on list (every judging
// command's --fail-on accepts it: a value no record held exits 1).
void take_fail_on_unmatched(std::vector<std::string>& fail_on, CommonOptions& options);
// --fail-on for commands whose only finding to fail on is "unmatched".
void add_fail_on_unmatched_option(CLI::App& command, CommonOptions& options);

void add_common_options(CLI::App& command, CommonOptions& options);
// Only --summary and --quiet, for commands that read no records (listen).
void add_report_options(CLI::App& command, CommonOptions& options);

// --wide, for commands with a table report: never cut its lines.
void add_wide_option(CLI::App& command, bool& wide);
// The width a table report written to stdout is cut to (table_width in
// util/render.hpp): the terminal's, COLUMNS, or never (files, pipes,
// --wide). `to_stdout` is false when the report goes to a file.
[[nodiscard]] std::size_t stdout_table_width(bool wide, bool to_stdout);

// --store-timeout, for commands with a --store: how long a Redis store may
// stay unreachable before the run fails (exit 4).
void add_store_timeout_option(CLI::App& command, CommonOptions& options);
// Sets it for this process; `fallback` when the flag was not given.
void apply_store_timeout(const CommonOptions& options, std::chrono::milliseconds fallback);

// --threads: worker threads, 0 (default) one per core, at most 8.
// `busy_ordered_stage`: the command judges in order on a thread of its own
// (run::worker_count), and the default is one worker fewer than cores.
void add_threads_option(CLI::App& command, std::size_t& threads, bool busy_ordered_stage = false);
// --lock-timeout: how long to wait for a SQLite store another process holds.
void add_lock_timeout_option(CLI::App& command, std::string& lock_timeout);

// The store a command keeps its state in when neither --store nor
// IDEM_STORE names one.
inline constexpr std::string_view k_default_store = "idem.db";

// --store (and IDEM_STORE) for a command that keeps state: `what` says
// what it keeps there. An empty value is the default store.
void add_store_option(CLI::App& command, std::string& store, std::string_view what);

// "" when `word` is one of `words`; else why not, with the closest.
[[nodiscard]] std::string choice_error(const std::string& word,
                                       const std::vector<std::string>& words);

// A flag that takes one of a few words, each naming a value of `Value` (an
// enum of the run's options): the word is checked once, where it is
// parsed, and the value stored ("--keep: 'lats' is not first or last; did
// you mean 'last'?"). Not CLI11's CheckedTransformer: it also takes the
// enum's numbers ("--keep 1") and names them in its messages. The help's
// TEXT:{first,last} is IsMember's, which docgen reads for the completions.
template <typename Target> struct ChoiceOf { using type = Target; };
template <typename Value> struct ChoiceOf<std::optional<Value>> {
    using type = Value; // an optional flag: unset until given
};

template <typename Target>
CLI::Option*
add_choice_option(CLI::App& command, const std::string& name, Target& target,
                  const std::string& help,
                  std::vector<std::pair<std::string, typename ChoiceOf<Target>::type>> choices) {
    std::vector<std::string> words;
    for (const auto& choice : choices)
        words.push_back(choice.first);
    auto* option = command.add_option_function<std::string>(
        name,
        [&target, choices](const std::string& word) {
            for (const auto& [choice, value] : choices)
                if (choice == word) target = value;
        },
        help);
    option->check(CLI::Validator([words](std::string& word) { return choice_error(word, words); },
                                 fmt::format("{{{}}}", fmt::join(words, ","))));
    return option;
}

[[nodiscard]] run::InputOptions input_options(const CommonOptions& options);
// `inputs` as the files they name (folders with --recursive, patterns,
// "-"), as every command expands its inputs; what a folder or pattern left
// out is a warning.
[[nodiscard]] std::vector<std::string> expanded_inputs(const CommonOptions& options,
                                                       const std::vector<std::string>& inputs);

// What --since and --until accept as given: never empty, never a signed
// bare number (a 1969 time, or a duration without its unit).
[[nodiscard]] CLI::Validator time_bound_check();

// --since/--until, for the commands that read event times.
void add_time_window_options(CLI::App& command, CommonOptions& options);
// The window they give: each a time, or a duration back from the newest
// event time in `input` (read once first; files only). A time without a UTC
// offset is read in `zone` (--tz) when given. With --sorted, `input` is
// told to cut its files to the window (run/time_seek.hpp). Throws
// UsageError.
[[nodiscard]] record::TimeWindow time_window(const CommonOptions& options, run::InputOptions& input,
                                             const record::FieldPath* time_field,
                                             const TimeZone* zone);
[[nodiscard]] run::Strictness strictness(const CommonOptions& options);

// Writes to stderr and ignores failure: a diagnostic that cannot be
// written (stderr on a full disk or a closed pipe) must never end the run,
// raise SIGPIPE or change its exit status.
void write_stderr(std::string_view text);

template <typename... Args> void print_stderr(fmt::format_string<Args...> format, Args&&... args) {
    write_stderr(fmt::format(format, std::forward<Args>(args)...));
}

// Prints the summary on stderr: one line, or JSON with --summary json.
void print_summary(const CommonOptions& options, const io::Summary& summary);
// --metrics FILE: the run's figures for node_exporter's textfile collector,
// replaced whole (written beside it, then renamed). A failure to write it
// is a warning: the run's own outcome stands.
void write_metrics_file(const CommonOptions& options, const io::Summary& summary, int code);
// After a run that failed before its summary (a usage error, a store
// failure): the chosen command's --metrics FILE says so, with its exit code.
void write_failed_run_metrics(int code);

class StderrDiagnostics;

// Ends a record-reading run: the count of warnings not shown, the summary,
// and the exit code under the one rule for records set aside
// (docs/exit-codes.md): any rejected record makes the exit at least 1, and
// a run that rejected every record it read exits 3, with a hint at the
// likely cause. `code` is what the run's findings say (0 or 1).
[[nodiscard]] int finish_run(const CommonOptions& options, StderrDiagnostics& diagnostics,
                             const io::Summary& summary, int code);

// Warnings to stderr (the first 20, then a count), and a progress line when
// stderr is a terminal.
class StderrDiagnostics final : public io::Diagnostics {
public:
    // Whether the command has --reject, so the "more set aside" line can name it.
    enum class RejectFlag { offered, absent };
    explicit StderrDiagnostics(bool quiet, RejectFlag reject_flag = RejectFlag::offered);
    ~StderrDiagnostics() override;
    void warning(const SourcePosition& where, std::string_view message) override;
    void progress(std::uint64_t records, std::uint64_t bytes,
                  std::optional<std::uint64_t> total_bytes) override;
    // Says how many warnings were not shown (once; before the summary).
    void report_hidden();

private:
    bool m_quiet;
    RejectFlag m_reject_flag;
    bool m_terminal;
    // Warnings about one record (a position) and about the run (none),
    // each shown up to its own bound: a flood of the first never hides
    // the second ("--key: 'kye' is in none of 30 records; did you mean
    // 'key'?" comes after the records that lacked it).
    std::uint64_t m_warnings = 0;
    std::uint64_t m_run_warnings = 0;
    bool m_progress_shown = false;
    bool m_hidden_reported = false;
    std::chrono::steady_clock::time_point m_start;
    io::ProgressPacer m_progress_pacer;
};

// A duration a flag gives that must be longer than 0. Throws UsageError
// naming the flag.
[[nodiscard]] idem::Duration positive_duration(std::string_view flag, std::string_view text);

// Reads an environment variable for a flag (the library never does).
[[nodiscard]] std::string require_env(const std::string& name, const std::string& flag);

// IDEM_CRASH_AT's "record:N" or "commit:K" (util/crash_point.hpp); throws
// UsageError for anything else.
void set_crash_point_from(std::string_view text);

} // namespace idem::cli
