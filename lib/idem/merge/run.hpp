#pragma once
// idem merge over a stream of records (docs/merge.md).

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/merge/rules.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace idem::merge {

enum class MissingGroup { reject, pass };
enum class PreviewFormat { ndjson, table };

struct MergeRunOptions {
    run::InputOptions input;
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    // Tried in order; a record goes to the first whose match holds.
    std::vector<MergeRule> rules;
    // Records that pass through at once, unmerged (--bypass).
    std::vector<Condition> bypass;
    std::optional<record::FieldPath> time_field; // default: received_at, else read time
    Duration max_lateness{0};
    // A record timed more than max_future after `now` (the wall clock,
    // read once by the caller) is rejected: it would move the watermark past
    // every other record and close every window (docs/merge.md).
    Duration max_future = std::chrono::hours(24);
    Timestamp now{};
    std::optional<TimeZone> zone;
    MissingGroup missing = MissingGroup::reject;
    std::uint64_t max_open = 1'000'000;
    std::uint64_t max_open_bytes = 1ULL << 30; // --max-open-bytes
    // Outputs: -o FILE (checkpointed with the store), else stdout.
    std::string output_path;
    std::string late_path; // late records, with the reason
    // Without late_path late records go to the output, marked
    // (_idem.merge.late); drop_late drops them, on purpose.
    bool drop_late = false;
    std::string unmatched_path; // records no rule matched (default: passed through)
    std::string members_path;   // every member, with the ids it went into
    // --preview: no merged output; groups that would merge, with members.
    bool preview = false;
    std::size_t preview_limit = 20;
    PreviewFormat preview_format = PreviewFormat::ndjson;
    std::string store_uri = "idem.db"; // only opened with -o
    std::string scope = "default";
    Duration lock_timeout = std::chrono::seconds(60);
    std::size_t threads = 0;
    std::uint64_t batch = 65536; // records per store transaction (with -o)
};

struct MergeResult {
    io::Summary summary;
    std::uint64_t late = 0;
};

// Throws InputError (unreadable input, --strict, past --max-open),
// StoreError, FileSystemError.
MergeResult run_merge(const MergeRunOptions& options, io::Sink& standard_output,
                      io::Diagnostics& diagnostics);

} // namespace idem::merge
