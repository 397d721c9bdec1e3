#include "common.hpp"

#include "app.hpp"

#include "idem/io/metrics.hpp"
#include "idem/io/progress.hpp"
#include "idem/io/sink.hpp"
#include "idem/run/input_paths.hpp"
#include "idem/run/newest_time.hpp"
#include "idem/store/store.hpp"
#include "idem/util/crash_point.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/pipe_signal.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <fmt/format.h>
#include <fstream>
#include <sys/ioctl.h>
#include <unistd.h>

namespace idem::cli {

namespace {
constexpr std::uint64_t k_max_warnings_shown = 20;

// Every command's report options, with its name: the one whose --metrics
// was given is the command that ran (write_failed_run_metrics).
std::vector<std::pair<std::string, CommonOptions*>>& registered_report_options() {
    static std::vector<std::pair<std::string, CommonOptions*>> registered;
    return registered;
}
} // namespace

void add_common_options(CLI::App& command, CommonOptions& options) {
    command.add_option("inputs", options.inputs,
                       "files to read ('-' or none: stdin): NDJSON, a JSON array or page, HAR or "
                       "CSV, plain or gzip, zstd, xz, bzip2 compressed (each told by its first "
                       "bytes); a quoted pattern ('captures/*.ndjson.gz') is expanded by idem, in "
                       "name order");
    command.add_flag("--recursive", options.recursive,
                     "a directory among the inputs: read every regular file under it, in path "
                     "order (names starting with '.', links out of it and files this run "
                     "writes left out, each with a warning)");
    command.add_flag("--follow-links", options.follow_links,
                     "a link that a directory or a pattern among the inputs holds may lead out "
                     "of it (never to /proc, /sys or /dev)");
    add_choice_option(command, "--input-format", options.input_format,
                      "ndjson, json (an array, or a page with a \"data\" array), har (HAR 1.2 "
                      "export) or csv (a header row; each row a record of string values); "
                      "default: told by each input's first bytes",
                      {{"ndjson", run::InputFormat::ndjson},
                       {"json", run::InputFormat::json},
                       {"jsonl", run::InputFormat::ndjson},
                       {"har", run::InputFormat::har},
                       {"csv", run::InputFormat::csv}});
    command.add_option("--csv-delimiter", options.csv_delimiter,
                       "with --input-format csv: the character between fields (default ',', "
                       "'tab' for TSV)");
    command.add_flag("--csv-types", options.csv_types,
                     "CSV values that are unquoted numbers or true/false become JSON numbers and "
                     "booleans (default: every value a string, as the file has it)");
    command.add_option(
        "--max-record-size", options.max_record_size,
        "longest record accepted; longer ones are rejected unbuffered (default 16MiB)");
    command.add_option("--reject", options.reject_path,
                       "write input lines that are not records here, byte for byte");
    command.add_flag("--strict", options.strict, "stop at the first bad record (exit 3)");
    command
        .add_option("--allow-absent", options.allow_absent,
                    "a field path given to a flag that no record may hold (repeatable); "
                    "otherwise such a path is taken for a typo: a warning, and exit 3")
        ->allow_extra_args(false);
    add_report_options(command, options);
}

void add_report_options(CLI::App& command, CommonOptions& options) {
    add_choice_option(command, "--summary", options.summary_json,
                      "summary on stderr: text (default) or json",
                      {{"text", false}, {"json", true}});
    command.add_flag("-q,--quiet", options.quiet,
                     "no text summary, warnings or progress on stderr");
    command.add_option("--metrics", options.metrics_path,
                       "write the run's figures to FILE as OpenMetrics gauges, which "
                       "node_exporter's textfile collector reads, replaced whole at the end");
    registered_report_options().emplace_back(command.get_name(), &options);
}

void set_written_files(std::string_view command, std::vector<std::string> files) {
    for (auto& [name, options] : registered_report_options())
        if (name == command) options->written_files = files;
}

void take_fail_on_unmatched(std::vector<std::string>& fail_on, CommonOptions& options) {
    auto unmatched = std::remove(fail_on.begin(), fail_on.end(), "unmatched");
    if (unmatched != fail_on.end()) options.fail_on_unmatched = true;
    fail_on.erase(unmatched, fail_on.end());
}

void add_fail_on_unmatched_option(CLI::App& command, CommonOptions& options) {
    command
        .add_option_function<std::vector<std::string>>(
            "--fail-on",
            [&options](const std::vector<std::string>& values) {
                for (const auto& value : values) {
                    if (value != "unmatched")
                        throw CLI::ValidationError(
                            "--fail-on",
                            fmt::format("unknown value {}: expected unmatched", quote(value)));
                    options.fail_on_unmatched = true;
                }
            },
            "unmatched: exit 1 when a value a flag expects (PATH=VALUE) is held by no record")
        ->delimiter(',')
        ->allow_extra_args(false);
}

void add_wide_option(CLI::App& command, bool& wide) {
    command.add_flag("--wide", wide,
                     "never cut table lines (on a terminal they are cut to its width, or to "
                     "COLUMNS; into files and pipes never)");
}

std::size_t stdout_table_width(bool wide, bool to_stdout) {
    ReaderWidth reader;
    reader.wide = wide;
    reader.to_terminal = to_stdout && ::isatty(STDOUT_FILENO) == 1;
    if (const char* columns = std::getenv("COLUMNS")) reader.columns_variable = columns;
    winsize size{};
    if (reader.to_terminal && ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &size) == 0)
        reader.terminal_columns = size.ws_col;
    return table_width(reader);
}

void write_metrics_file(const CommonOptions& options, const io::Summary& summary, int code) {
    if (options.metrics_path.empty()) return;
    auto versioned = summary;
    versioned.version = version_line();
    // Gauges only, so one text reads as both formats: OpenMetrics (it ends
    // with "# EOF") and the classic text format node_exporter's textfile
    // collector parses, where that line is a comment.
    auto text = io::render_metrics(io::run_metrics(versioned, code, now_utc()),
                                   io::MetricsFormat::openmetrics);
    // Beside the file, then renamed over it: the collector never reads half.
    try {
        auto sink = io::Sink::replace_regular_file(options.metrics_path);
        sink->write(text);
        sink->publish();
    } catch (const Error& error) {
        print_stderr("idem: warning: cannot write --metrics: {}\n", terminal_text(error.what()));
    }
}

void write_failed_run_metrics(int code) {
    for (const auto& [name, options] : registered_report_options())
        if (!options->metrics_path.empty()) {
            io::Summary summary;
            summary.command = name;
            write_metrics_file(*options, summary, code);
            return;
        }
}

void add_store_timeout_option(CLI::App& command, CommonOptions& options) {
    command.add_option("--store-timeout", options.store_timeout,
                       "how long a Redis store may stay unreachable (a restart, a failover) "
                       "before the run fails, retrying with backoff (default 10s; listen: 1s)");
}

void apply_store_timeout(const CommonOptions& options, std::chrono::milliseconds fallback) {
    Duration timeout = fallback;
    if (!options.store_timeout.empty()) {
        timeout = parse_duration(options.store_timeout);
        if (timeout.count() < 0) throw UsageError("--store-timeout cannot be negative");
    }
    store::set_store_timeout(timeout);
}

std::vector<std::string> expanded_inputs(const CommonOptions& options,
                                         const std::vector<std::string>& inputs) {
    run::InputExpansion expansion;
    expansion.recursive = options.recursive;
    expansion.links =
        options.follow_links ? run::LinkPolicy::follow_links : run::LinkPolicy::stay_inside;
    expansion.written = options.written_files;
    auto expanded = run::expand_inputs(inputs, expansion);
    if (!options.quiet)
        for (const auto& skipped : expanded.skipped)
            print_stderr("idem: warning: {}: left out: {}\n", quote(skipped.path),
                         terminal_text(skipped.reason));
    return std::move(expanded.files);
}

run::InputOptions input_options(const CommonOptions& options) {
    run::InputOptions input;
    input.paths = expanded_inputs(options, options.inputs);
    input.format = options.input_format;
    if (!options.csv_delimiter.empty()) {
        if (input.format != run::InputFormat::csv && input.format != run::InputFormat::detect)
            throw UsageError("--csv-delimiter goes with CSV input, not --input-format ndjson, "
                             "json or har");
        auto delimiter = options.csv_delimiter == "tab" || options.csv_delimiter == "\\t"
                             ? std::string("\t")
                             : options.csv_delimiter;
        if (delimiter.size() != 1 || delimiter == "\"" || delimiter == "\n" || delimiter == "\r")
            throw UsageError(fmt::format("--csv-delimiter {}: one character other than a quote or "
                                         "a line break ('tab' for TSV)",
                                         quote(options.csv_delimiter)));
        input.csv_delimiter = delimiter.front();
    }
    if (options.csv_types) {
        if (input.format != run::InputFormat::csv && input.format != run::InputFormat::detect)
            throw UsageError("--csv-types goes with CSV input, not --input-format ndjson, json "
                             "or har");
        input.csv_values = run::CsvValues::typed;
    }
    input.max_record_bytes = parse_byte_size(options.max_record_size);
    if (input.max_record_bytes == 0) throw UsageError("--max-record-size must be at least 1 byte");
    for (const auto& text : options.allow_absent)
        for (auto& path : record::FieldPath::parse_list(text))
            input.allow_absent.push_back(std::move(path));
    return input;
}

CLI::Validator time_bound_check() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            // An empty value (--since "$UNSET") would be no bound at all: the
            // window a script meant would silently hold every record.
            if (text.empty())
                return "an empty value names no time: give a time (RFC 3339) or a duration (2h)";
            // "-1" would be a time before 1970, "+5" epoch seconds: a
            // signed number is a duration that lost its unit.
            bool signed_number = (text.front() == '-' || text.front() == '+') && text.size() > 1 &&
                                 text.find_first_not_of("0123456789.", 1) == std::string::npos;
            if (signed_number)
                return fmt::format("{} is a signed number, not a time: give a duration its unit "
                                   "(30m, 2h) or a time in RFC 3339",
                                   quote(text));
            return std::string();
        },
        "");
}

void add_time_window_options(CLI::App& command, CommonOptions& options) {
    command
        .add_option("--since", options.since,
                    "only records whose event time is at or after this: a time (RFC 3339, "
                    "epoch seconds), or a duration back from the newest record's (2h: the "
                    "last two hours of the log; files only); others are counted as "
                    "outside_range")
        ->check(time_bound_check());
    command
        .add_option("--until", options.until,
                    "only records whose event time is before this: a time, or a duration back "
                    "from the newest record's")
        ->check(time_bound_check());
    command.add_flag("--sorted", options.sorted,
                     "each input file is in event-time order: a plain file is cut to "
                     "--since/--until by binary search, the lines outside counted as "
                     "outside_range unread (a file the search finds out of order is exit 3)");
}

record::TimeWindow time_window(const CommonOptions& options, run::InputOptions& input,
                               const record::FieldPath* time_field, const TimeZone* zone) {
    if (options.sorted) {
        if (options.since.empty() && options.until.empty())
            throw UsageError("--sorted lets --since/--until seek in files in time order: give one "
                             "of them, or leave --sorted out");
        run::TimeOrder order;
        if (time_field) order.time_field = *time_field;
        if (zone) order.zone = *zone;
        input.sorted = std::move(order);
    }
    std::optional<std::optional<Timestamp>> newest; // read once, when a duration asks for it
    auto resolve = [&](std::string_view flag, const std::string& text) -> std::optional<Timestamp> {
        if (text.empty()) return std::nullopt;
        // A bare number is epoch seconds only when it names a time of this
        // century: "30" is a duration that lost its unit, not 1970.
        bool bare_number = !text.empty() && text.find_first_not_of("0123456789.") == text.npos;
        if (bare_number && text.size() < 9)
            throw UsageError(fmt::format("{} {}: a bare number would be {} seconds after "
                                         "1970-01-01; give a duration its unit (30m, 2h) or a "
                                         "time in RFC 3339",
                                         flag, text, text));
        if (auto at = parse_timestamp(text)) {
            if (zone && lacks_utc_offset(text)) return zone->from_local(*at);
            return at;
        }
        Duration back{};
        try {
            back = parse_duration(text);
        } catch (const UsageError&) {
            throw UsageError(fmt::format("{}: {} is neither a time (RFC 3339, or epoch seconds) "
                                         "nor a duration back from the newest record (2h, 30m, 1d)",
                                         flag, quote(text)));
        }
        if (!newest) newest = run::newest_event_time(input, time_field, zone);
        if (!*newest)
            throw UsageError(fmt::format("{} {}: no record has an event time to count back from{}",
                                         flag, text,
                                         time_field ? "" : " (a plain event needs --time-field)"));
        return **newest - back;
    };
    record::TimeWindow window;
    window.since = resolve("--since", options.since);
    window.until = resolve("--until", options.until);
    if (window.since && window.until && *window.until <= *window.since)
        throw UsageError(fmt::format("--until ({}) must come after --since ({}): the window holds "
                                     "no time",
                                     format_rfc3339(*window.until), format_rfc3339(*window.since)));
    return window;
}

run::Strictness strictness(const CommonOptions& options) {
    return options.strict ? run::Strictness::strict : run::Strictness::lenient;
}

void write_stderr(std::string_view text) {
    // A reader that went away cannot kill the process: SIGPIPE is held back.
    PipeSignalHeld held;
    while (!text.empty()) {
        auto written = ::write(STDERR_FILENO, text.data(), text.size());
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) break;
        text.remove_prefix(static_cast<std::size_t>(written));
    }
}

void add_threads_option(CLI::App& command, std::size_t& threads, bool busy_ordered_stage) {
    command
        .add_option("--threads", threads,
                    busy_ordered_stage
                        ? "worker threads (default: one per core but the one that judges in "
                          "order, at least one, at most 8)"
                        : "worker threads (default: one per core, at most 8)")
        ->check(CLI::Range(0, 64));
}

void add_lock_timeout_option(CLI::App& command, std::string& lock_timeout) {
    command.add_option("--lock-timeout", lock_timeout,
                       "how long to wait for a SQLite store another process holds (default 60s)");
}

void add_store_option(CLI::App& command, std::string& store, std::string_view what) {
    store = std::string(k_default_store);
    command
        .add_option("--store", store,
                    fmt::format("{}{}PATH (SQLite, default {}), :memory:, redis://host:port[/db]",
                                what, what.empty() ? "" : ": ", k_default_store))
        ->envname("IDEM_STORE")
        ->capture_default_str()
        ->transform(CLI::Validator(
            [](std::string& uri) {
                if (uri.empty()) uri = std::string(k_default_store);
                return std::string();
            },
            ""));
}

std::string choice_error(const std::string& word, const std::vector<std::string>& words) {
    if (std::find(words.begin(), words.end(), word) != words.end()) return {};
    std::string listed;
    for (std::size_t i = 0; i < words.size(); ++i) {
        if (i > 0) listed += i + 1 == words.size() ? " or " : ", ";
        listed += words[i];
    }
    auto close = closest_name(word, words);
    return fmt::format("{} is not {}{}", quote(word), listed,
                       close.empty() ? std::string()
                                     : fmt::format("; did you mean {}?", quote(close)));
}

void print_summary(const CommonOptions& options, const io::Summary& summary) {
    if (options.summary_json) {
        auto versioned = summary;
        versioned.version = version_line();
        print_stderr("{}\n", io::render_summary_json(versioned));
    } else if (!options.quiet)
        print_stderr("{}\n", io::render_summary_text(summary));
}

namespace {

// What format detection looks at: a file's first k_detect_bytes (none
// for one that cannot be opened).
std::string first_bytes(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    std::string start(run::k_detect_bytes, '\0');
    file.read(start.data(), static_cast<std::streamsize>(start.size()));
    start.resize(static_cast<std::size_t>(file.gcount()));
    return start;
}

// Why every record may have been rejected, from what the inputs look like.
std::string all_rejected_hint(const CommonOptions& options) {
    // Told by their first bytes, HAR, CSV and JSON documents are read as
    // such: the hint is for inputs read as NDJSON because --input-format
    // said so, by the same rule (compressed inputs are not looked into).
    if (options.input_format == run::InputFormat::ndjson) {
        for (const auto& path : options.inputs) {
            auto start = first_bytes(path);
            switch (run::detect_input_format(start, ',')) {
            case run::InputFormat::har:
                return fmt::format("{} looks like a HAR file: drop --input-format ndjson, or "
                                   "say --input-format har",
                                   quote(path));
            case run::InputFormat::csv:
                return fmt::format("{} looks like CSV, not NDJSON: drop --input-format ndjson, "
                                   "or say --input-format csv",
                                   quote(path));
            case run::InputFormat::json:
                return fmt::format("{} looks like one JSON document, not NDJSON: drop "
                                   "--input-format ndjson, or say --input-format json",
                                   quote(path));
            case run::InputFormat::ndjson:
            case run::InputFormat::detect:
                break;
            }
        }
    }
    // CSV whose fields another character separates reads as lines that
    // are no JSON: name the flag that reads it.
    if (options.input_format == run::InputFormat::detect && options.csv_delimiter.empty()) {
        for (const auto& path : options.inputs) {
            auto start = first_bytes(path);
            if (run::detect_input_format(start, ',') == run::InputFormat::csv) continue;
            for (char delimiter : {';', '\t', '|'})
                if (run::detect_input_format(start, delimiter) == run::InputFormat::csv)
                    return fmt::format(
                        "{} looks like CSV separated by {}: pass --csv-delimiter {}", quote(path),
                        delimiter == '\t' ? "tabs" : quote(std::string(1, delimiter)),
                        delimiter == '\t' ? std::string("tab") : quote(std::string(1, delimiter)));
        }
    }
    return "check the field paths (--key, --seq, --time-field, ...) against one record, e.g. "
           "'head -1 FILE | jq .'";
}

} // namespace

int finish_run(const CommonOptions& options, StderrDiagnostics& diagnostics,
               const io::Summary& summary, int code) {
    diagnostics.report_hidden();
    auto in = summary.count("in");
    auto rejected = summary.count("rejected");
    bool all_rejected = rejected > 0 && rejected >= in;
    // A window no record falls in is a typo (a year, a zone) until the
    // counts say otherwise: as a path no record holds, it fails the run.
    auto outside = summary.count("outside_range");
    bool none_in_window = outside > 0 && outside >= in;
    if (none_in_window && !options.quiet)
        print_stderr("idem: error: no record's event time is in --since/--until (all {} "
                     "outside it)\n",
                     in);
    // The summary stays the last line: scripts read it from there.
    if (all_rejected && !options.quiet)
        print_stderr("idem: error: every record was rejected ({} of {}): {}\n", rejected, in,
                     all_rejected_hint(options));
    print_summary(options, summary);
    // A path no record held is a typo until --allow-absent says otherwise
    // (PathCensus): the answer was computed from nothing.
    if (all_rejected || none_in_window || summary.count("absent_paths") > 0)
        code = static_cast<int>(ExitCode::bad_input);
    else if (rejected > 0)
        code = std::max(code, static_cast<int>(ExitCode::findings));
    if (code == 0 && options.fail_on_unmatched && summary.count("unmatched_values") > 0)
        code = static_cast<int>(ExitCode::findings);
    write_metrics_file(options, summary, code);
    return code;
}

StderrDiagnostics::StderrDiagnostics(bool quiet, RejectFlag reject_flag)
    : m_quiet(quiet), m_reject_flag(reject_flag), m_terminal(::isatty(STDERR_FILENO) == 1),
      m_start(std::chrono::steady_clock::now()) {}

StderrDiagnostics::~StderrDiagnostics() {
    report_hidden(); // clears the progress line too
}

void StderrDiagnostics::report_hidden() {
    if (m_progress_shown) {
        write_stderr("\r\033[K");
        m_progress_shown = false;
    }
    auto hidden =
        (m_warnings > k_max_warnings_shown ? m_warnings - k_max_warnings_shown : 0) +
        (m_run_warnings > k_max_warnings_shown ? m_run_warnings - k_max_warnings_shown : 0);
    if (hidden == 0 || m_quiet || m_hidden_reported) return;
    m_hidden_reported = true;
    print_stderr(
        "idem: warning: {} more warnings not shown (the summary counts them{})\n", hidden,
        m_reject_flag == RejectFlag::offered ? "; --reject FILE keeps each record set aside" : "");
}

void StderrDiagnostics::warning(const SourcePosition& where, std::string_view message) {
    auto& shown = where.source.empty() ? m_run_warnings : m_warnings;
    ++shown;
    if (m_quiet || shown > k_max_warnings_shown) return;
    if (m_progress_shown) write_stderr("\r\033[K");
    if (where.source.empty())
        print_stderr("idem: warning: {}\n", terminal_text(message));
    else
        print_stderr("idem: warning: {}: {}\n", where.to_string(), terminal_text(message));
}

void StderrDiagnostics::progress(std::uint64_t records, std::uint64_t bytes,
                                 std::optional<std::uint64_t> total_bytes) {
    if (m_quiet || !m_terminal) return;
    auto now = std::chrono::steady_clock::now();
    if (!m_progress_pacer.due(now)) return;
    m_progress_shown = true;
    print_stderr("\r\033[K{}", io::progress_line(records, bytes, total_bytes, now - m_start));
}

idem::Duration positive_duration(std::string_view flag, std::string_view text) {
    auto duration = parse_duration(text);
    if (duration.count() <= 0) throw UsageError(fmt::format("{} must be longer than 0", flag));
    return duration;
}

std::string require_env(const std::string& name, const std::string& flag) {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr)
        throw UsageError(fmt::format("{}: environment variable {} is not set", flag, quote(name)));
    if (*value == '\0')
        throw UsageError(
            fmt::format("{}: environment variable {} is set but empty", flag, quote(name)));
    return value;
}

void set_crash_point_from(std::string_view text) {
    auto colon = text.find(':');
    auto where = text.substr(0, colon);
    auto count_text = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
    std::uint64_t count = 0;
    auto [end, error] =
        std::from_chars(count_text.data(), count_text.data() + count_text.size(), count);
    bool counted = !count_text.empty() && error == std::errc() &&
                   end == count_text.data() + count_text.size() && count > 0;
    if (where == "record" && counted)
        set_crash_point(CrashAt::record, count);
    else if (where == "commit" && counted)
        set_crash_point(CrashAt::commit, count);
    else if (where == "interrupt" && counted)
        set_crash_point(CrashAt::interrupt, count);
    else
        throw UsageError(fmt::format(
            "IDEM_CRASH_AT {}: record:N, commit:N or interrupt:N, N above 0", quote(text)));
}

} // namespace idem::cli
