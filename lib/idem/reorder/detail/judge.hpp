#pragma once
// Internal to reorder: the worker side of a run. Workers parse each line of a
// block and read its partition and order key; the ordered stage (run.cpp)
// offers them to the sequencer in input order.

#include "idem/io/block_reader.hpp"
#include "idem/record/parser.hpp"
#include "idem/reorder/run.hpp"
#include "idem/run/input.hpp"

#include <optional>
#include <string>
#include <vector>

namespace idem::reorder::detail {

// Kept small: a block of short records has tens of thousands of them.
struct Outcome {
    enum class Kind : std::uint8_t { too_long, failed_to_parse, bad_field, outside_range, ordered };
    io::BlockLine line;
    OrderKey key;
    Timestamp event_time; // with --time-field
    // The partition key, in BlockOutcome::partitions.
    std::uint32_t partition_offset = 0;
    std::uint32_t partition_size = 0;
    Kind kind = Kind::ordered;
};

// Why a line was set aside (failed_to_parse, bad_field): rare, so apart.
struct Failure {
    std::size_t outcome = 0;
    std::uint64_t column = 0;
    std::string message;
};

struct BlockOutcome {
    std::vector<Outcome> outcomes;
    std::vector<Failure> failures; // in outcome order
    std::string partitions;        // every record's partition key, back to back
    std::uint64_t lines = 0;       // blank ones included, for line numbers

    void clear() {
        outcomes.clear();
        failures.clear();
        partitions.clear();
        lines = 0;
    }

    [[nodiscard]] std::string_view partition_of(const Outcome& outcome) const {
        return std::string_view(partitions)
            .substr(outcome.partition_offset, outcome.partition_size);
    }
};

// One per worker thread: parsers are not shared.
struct WorkerState {
    record::RecordParser parser;
};

// Fills `result`, which comes empty.
void judge_block(const run::InputBlock& block, WorkerState& state, const ReorderRunOptions& options,
                 BlockOutcome& result);

} // namespace idem::reorder::detail
