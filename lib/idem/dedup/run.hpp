#pragma once
// `idem dedup` over a stream of records (docs/dedup.md): fingerprint each
// record, claim the fingerprint in the store, and route the record by what
// the store answered. Called by the CLI with everything already decided.

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/record/key.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/time.hpp"
#include "idem/util/time_zone.hpp"

#include <atomic>
#include <chrono>
#include <optional>
#include <string>

namespace idem::dedup {

// What happens to a duplicate: kept out of stdout (to --dups FILE when
// given), passed with an annotation, or only counted.
enum class DuplicateAction { drop, mark, count };
enum class MissingKey { reject, pass };
enum class KeyPrinting { off, on };
// Which copy of an event is emitted: the first (as it arrives), or the
// newest (when its window closes, or at the end of the input).
enum class KeepCopy { first, last };
// When the store fails: stop (exit 4, nothing emitted as new that was not
// claimed), or let records through unclaimed, with a warning.
// What a run does when the store fails: stop (exit 4); go on judging within
// this process, counted as unclaimed (pass); or the same, marked degraded,
// and the fingerprints written back to the store once it answers (local).
enum class StoreFailure { fail, pass, local };

struct DedupRunOptions {
    run::InputOptions input;
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    record::KeySpec key;
    MissingKey missing = MissingKey::reject;
    std::optional<record::FieldPath> time_field; // default: received_at, else the time read
    Duration window{0};                          // 0: no window
    std::optional<BucketSize> bucket;            // fold the calendar bucket into the key
    TimeZone zone = TimeZone::utc();             // whose calendar
    Duration ttl = std::chrono::hours(24);
    std::uint64_t allow = 1; // copies that pass before the rest are duplicates
    KeepCopy keep = KeepCopy::first;
    std::uint64_t max_held_bytes = 256ULL << 20; // --keep last holds at most this much
    DuplicateAction action = DuplicateAction::drop;
    std::string dups_path;
    // -o FILE: idem owns the output, and a rerun after a crash resumes it
    // exactly (see store::Checkpoint). Empty: the `output` sink (stdout).
    std::string output_path;
    KeyPrinting print_key = KeyPrinting::off;
    // --counts FILE: one line per key (detail/key_counts.hpp); empty: none.
    std::string counts_path;
    std::string store_uri;
    StoreFailure on_store_error = StoreFailure::fail;
    Duration lock_timeout = std::chrono::seconds(60);
    std::string scope = "default";
    std::size_t threads = 0;
    std::uint64_t batch = 65536; // records per store transaction
    // A stop asked by Ctrl-C or SIGTERM (util/interrupt.hpp): the run
    // commits what it routed, notes it for a rerun, and throws Interrupted
    // saying what it committed and how to resume. Null: not asked.
    const std::atomic<int>* interrupt = nullptr;
    bool resume_to_stdout = false; // --resume-to-stdout (OwnedOutputs::Owner)
};

struct DedupResult {
    io::Summary summary;
    std::uint64_t duplicates = 0;
};

// Throws InputError, StoreError, FileSystemError, UsageError.
DedupResult run_dedup(const DedupRunOptions& options, io::Sink& output,
                      io::Diagnostics& diagnostics);

// Deletes expired fingerprints (and nonces) from the store.
io::Summary collect_garbage(const std::string& store_uri);

} // namespace idem::dedup
