#pragma once
// `idem reorder` over a stream of records (docs/reorder.md): read each
// record's partition and order key, let the sequencer put them in order,
// and route what it says: released records to the output, gaps to the
// output or --gaps FILE, late and duplicate records to --late FILE. Called by
// the CLI with everything already decided.

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/order/sequencer.hpp"
#include "idem/record/field_path.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"

#include <optional>
#include <string>
#include <vector>

namespace idem::reorder {

// The sequencer is shared (order/): reorder speaks its nouns.
using order::HeldRecord;
using order::Offer;
using order::OrderKey;
using order::OrderMode;
using order::Partition;
using order::Sequencer;
using order::SequencerCounts;
using order::SequencerEvents;
using order::SequencerOptions;
using order::Verdict;

// At the end of the input: release what is held (in order, gaps reported),
// or keep it in the store for the next run.
enum class AtEnd { flush, hold };

struct ReorderRunOptions {
    run::InputOptions input;
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    SequencerOptions sequencer;
    std::optional<record::FieldPath> sequence_field; // sequence mode
    std::optional<record::FieldPath> order_by;       // time mode
    // Time mode: a record stamped more than max_future after `now` (the
    // wall clock, read once by the caller) is rejected; it would move the
    // watermark past every other record.
    Duration max_future = std::chrono::hours(24);
    Timestamp now{};
    std::vector<record::FieldPath> partition_fields; // empty: one partition
    // The clock of --gap-timeout: this field's time; none: the wall clock.
    std::optional<record::FieldPath> time_field;
    AtEnd at_end = AtEnd::flush;
    std::string gaps_path;  // empty: gap records go to the output
    std::string late_path;  // empty: late records go to the output, marked (_idem.late)
    bool drop_late = false; // --drop-late: dropped, with a warning each
    // -o FILE: idem owns the output, and a rerun after a crash resumes it
    // exactly (see store::Checkpoint). Empty: the `output` sink (stdout).
    std::string output_path;
    std::string store_uri;
    std::string scope = "default";
    Duration lock_timeout = std::chrono::seconds(60);
    std::size_t threads = 0;
    std::uint64_t batch = 1 << 20; // records per store transaction
    // --suggest (time mode): how late out-of-order records came, and the
    // --max-lateness that would have put 99%, 99.9% and all of them in order.
    bool suggest = false;
};

struct ReorderResult {
    io::Summary summary;
    std::uint64_t gaps = 0;
    std::uint64_t late = 0; // duplicates included
};

// Throws InputError, StoreError, FileSystemError, UsageError.
ReorderResult run_reorder(const ReorderRunOptions& options, io::Sink& output,
                          io::Diagnostics& diagnostics);

// Forgets a scope's reorder progress and held records.
io::Summary reset_reorder(const std::string& store_uri, const std::string& scope);

} // namespace idem::reorder
