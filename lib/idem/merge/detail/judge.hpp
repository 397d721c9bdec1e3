#pragma once
// Internal to merge: what a worker finds for one line (run.cpp acts on it
// on the ordered stage), without an allocation per record.

#include "idem/merge/run.hpp"
#include "idem/merge/windows.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/input.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace idem::merge::detail {

// What a worker found for one line; the ordered stage acts on it.
struct Outcome {
    enum class Kind : std::uint8_t {
        too_long,
        failed_to_parse,
        bad_field,     // a time, or an aggregate's value, that is not one
        outside_range, // --since/--until
        bypass,
        unmatched,
        unkeyed, // a group field missing, under --missing pass
        member,
    };
    io::BlockLine line;
    Kind kind = Kind::member;
    bool has_annotations = false;
    bool has_rule = false; // a rule matched (its counts include the record)
    std::uint32_t rule = 0;
    std::uint32_t group_at = 0, group_size = 0; // in BlockResult::texts
    std::uint32_t values_at = 0;                // in BlockResult::values
    std::optional<Timestamp> time;
    std::uint64_t column = 0;
    std::string message; // bad_field, failed_to_parse, or the missing group field
};

struct BlockResult {
    std::vector<Outcome> outcomes;
    std::uint64_t lines = 0;
    std::string texts;
    std::vector<Value> values;

    void clear() {
        outcomes.clear();
        lines = 0;
        texts.clear();
        values.clear();
    }
};

struct WorkerState {
    record::RecordParser parser;
};

// Every line of `block`, on a worker thread: its rule, group, time and
// the values its aggregates read.
void judge_block(const run::InputBlock& block, WorkerState& state, const MergeRunOptions& options,
                 BlockResult& result);

} // namespace idem::merge::detail
