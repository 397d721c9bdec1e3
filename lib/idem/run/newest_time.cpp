#include "idem/run/newest_time.hpp"

#include "idem/io/diagnostics.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include "idem/io/byte_source.hpp"
#include "idem/run/time_seek.hpp"
#include "idem/util/unique_fd.hpp"
#include <fmt/format.h>

#include <fcntl.h>
#include <sys/stat.h>

namespace idem::run {

namespace {

// Standard input and pipes are read once: their records would be gone
// when the run proper reads them.
void require_files(const InputOptions& input) {
    if (input.paths.empty())
        throw UsageError("--since/--until with a duration count back from the newest record, "
                         "which needs the inputs read twice: give files (not standard input) "
                         "or a time (RFC 3339)");
    for (const auto& path : input.paths) {
        struct stat status {};
        bool is_pipe =
            path != "-" && ::stat(path.c_str(), &status) == 0 && S_ISFIFO(status.st_mode);
        if (path == "-" || is_pipe)
            throw UsageError(fmt::format(
                "--since/--until with a duration count back from the newest record, which needs "
                "the inputs read twice: {} can be read once; give a time (RFC 3339) instead",
                path == "-" ? std::string("standard input") : quote(path)));
    }
}

// --sorted: each plain file's newest record is its last; nullopt when an
// input is compressed or its last lines have no event time (then every
// record is read).
std::optional<std::optional<Timestamp>> newest_at_the_ends(const InputOptions& input) {
    std::optional<Timestamp> newest;
    for (const auto& path : input.paths) {
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        struct stat status {};
        if (!fd.valid() || ::fstat(fd.get(), &status) != 0 || !S_ISREG(status.st_mode))
            return std::nullopt;
        if (io::compression_of_file(fd.get()) != io::Compression::none) return std::nullopt;
        auto read_at = read_at_fd(fd.get(), path);
        auto last =
            last_event_time(read_at, static_cast<std::uint64_t>(status.st_size), *input.sorted);
        if (!last) return std::nullopt;
        if (!newest || *last > *newest) newest = last;
    }
    return newest;
}

} // namespace

std::optional<Timestamp> newest_event_time(const InputOptions& input,
                                           const record::FieldPath* time_field,
                                           const TimeZone* zone) {
    require_files(input);
    if (input.sorted && input.format != InputFormat::har && input.format != InputFormat::csv &&
        input.format != InputFormat::json)
        if (auto newest = newest_at_the_ends(input)) return *newest;
    io::SilentDiagnostics silent;
    RejectRouter passed_over(nullptr, Strictness::lenient, silent, input.max_record_bytes);
    InputStream stream(input, &passed_over);
    record::RecordParser parser;
    std::optional<Timestamp> newest;
    while (auto next = stream.next()) {
        if (next->oversized_bytes > 0 || parser.parse(next->bytes)) continue;
        auto time = record::event_time(parser, time_field, zone);
        if (time.time && (!newest || *time.time > *newest)) newest = time.time;
    }
    return newest;
}

} // namespace idem::run
