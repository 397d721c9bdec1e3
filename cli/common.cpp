#include "common.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <cstdlib>
#include <fmt/format.h>
#include <unistd.h>

namespace idem::cli {

namespace {
constexpr std::uint64_t k_max_warnings_shown = 20;
}

void add_common_options(CLI::App& command, CommonOptions& options) {
    command.add_option("inputs", options.inputs, "NDJSON files to read ('-' or none: stdin)");
    command
        .add_option("--input-format", options.input_format,
                    "ndjson (default) or har (HAR 1.2 export)")
        ->check(CLI::IsMember({"ndjson", "jsonl", "har"}));
    command.add_option(
        "--max-record-size", options.max_record_size,
        "longest record accepted; longer ones are rejected unbuffered (default 16MiB)");
    command.add_option("--reject", options.reject_path,
                       "write input lines that are not records here, byte for byte");
    command.add_flag("--strict", options.strict, "stop at the first bad record (exit 3)");
    add_report_options(command, options);
}

void add_report_options(CLI::App& command, CommonOptions& options) {
    command
        .add_option("--summary", options.summary_format,
                    "summary on stderr: text (default) or json")
        ->check(CLI::IsMember({"text", "json"}));
    command.add_flag("-q,--quiet", options.quiet,
                     "no text summary, warnings or progress on stderr");
}

record::InputOptions input_options(const CommonOptions& options) {
    record::InputOptions input;
    input.paths = options.inputs;
    input.format = record::parse_input_format(options.input_format);
    input.max_record_bytes = parse_byte_size(options.max_record_size);
    if (input.max_record_bytes == 0) throw UsageError("--max-record-size must be at least 1 byte");
    return input;
}

record::Strictness strictness(const CommonOptions& options) {
    return options.strict ? record::Strictness::strict : record::Strictness::lenient;
}

void print_summary(const CommonOptions& options, const io::Summary& summary) {
    if (options.summary_format == "json")
        fmt::print(stderr, "{}\n", io::render_summary_json(summary));
    else if (!options.quiet)
        fmt::print(stderr, "{}\n", io::render_summary_text(summary));
}

StderrDiagnostics::StderrDiagnostics(bool quiet)
    : m_quiet(quiet), m_terminal(::isatty(STDERR_FILENO) == 1),
      m_start(std::chrono::steady_clock::now()), m_last_progress(m_start) {}

StderrDiagnostics::~StderrDiagnostics() {
    if (m_progress_shown) fmt::print(stderr, "\r\033[K");
    if (m_warnings > k_max_warnings_shown && !m_quiet)
        fmt::print(stderr,
                   "idem: warning: {} more records set aside (see the summary, or --reject FILE)\n",
                   m_warnings - k_max_warnings_shown);
}

void StderrDiagnostics::warning(const SourcePosition& where, std::string_view message) {
    ++m_warnings;
    if (m_quiet || m_warnings > k_max_warnings_shown) return;
    if (m_progress_shown) fmt::print(stderr, "\r\033[K");
    if (where.source.empty())
        fmt::print(stderr, "idem: warning: {}\n", message);
    else
        fmt::print(stderr, "idem: warning: {}: {}\n", where.to_string(), message);
}

void StderrDiagnostics::progress(std::uint64_t records, std::uint64_t bytes) {
    if (m_quiet || !m_terminal) return;
    auto now = std::chrono::steady_clock::now();
    if (now - m_last_progress < std::chrono::seconds(1)) return;
    m_last_progress = now;
    m_progress_shown = true;
    double seconds = std::chrono::duration<double>(now - m_start).count();
    fmt::print(stderr, "\r\033[Kidem: {} records, {} read, {:.0f} records/s", records,
               format_bytes(bytes), static_cast<double>(records) / seconds);
}

std::string require_env(const std::string& name, const std::string& flag) {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr || *value == '\0')
        throw UsageError(fmt::format("{}: environment variable {} is not set", flag, quote(name)));
    return value;
}

} // namespace idem::cli
