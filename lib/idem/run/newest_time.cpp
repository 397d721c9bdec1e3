#include "idem/run/newest_time.hpp"

#include "idem/io/diagnostics.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
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

} // namespace

std::optional<Timestamp> newest_event_time(const InputOptions& input,
                                           const record::FieldPath* time_field,
                                           const TimeZone* zone) {
    require_files(input);
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
