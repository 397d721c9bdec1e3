#pragma once
// Internal to dedup: the worker side of a run. Workers parse each line of a
// block, find its event time and fingerprint it; the ordered stage
// (run.cpp) acts on what they found, in input order.

#include "idem/dedup/run.hpp"
#include "idem/io/block_reader.hpp"
#include "idem/record/key.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/input.hpp"
#include "idem/run/record_run.hpp"

#include <optional>
#include <string>
#include <vector>

namespace idem::dedup::detail {

// What a worker found for one line; the ordered stage acts on it.
struct Outcome {
    enum class Kind { too_long, failed_to_parse, bad_time, outside_range, missing_key, keyed };
    io::BlockLine line;
    Kind kind = Kind::keyed;
    std::uint64_t column = 0;
    std::string message; // failed_to_parse, bad_time; the path for missing_key
    record::Fingerprint fingerprint;
    std::optional<Timestamp> event_time; // none: the time it was read
    bool has_annotations = false;
    std::string encoded_key; // with --print-key
    // Which of its block's claims is this record's (run.cpp, claim_block);
    // k_unclaimed for a record the block claimed nothing for.
    std::uint32_t claim = k_unclaimed;
    static constexpr std::uint32_t k_unclaimed = 0xFFFFFFFF;
};

using BlockOutcome = run::BlockOutcomes<Outcome>;

// One per worker thread: parsers are not shared.
struct WorkerState {
    record::RecordParser parser;
    record::Fingerprinter fingerprinter;
    explicit WorkerState(const record::KeySpec& spec) : fingerprinter(spec) {}
};

// Fills `result`, which comes empty.
void judge_block(const run::InputBlock& block, WorkerState& state, const DedupRunOptions& options,
                 BlockOutcome& result);

// One record alone: for copies --keep last held in the store, judged again
// when a run resumes.
Outcome judge_record(std::string_view bytes, WorkerState& state, const DedupRunOptions& options);

} // namespace idem::dedup::detail
