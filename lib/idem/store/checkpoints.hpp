#pragma once
// The checkpoint role: how far a run that owns its output files got
// (owned_outputs.hpp), committed in the same transaction as its state.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace idem::store {

// How far a run that owns its output files got, committed with its claims:
// a rerun cuts each file back to its committed size and skips the records
// already done, so a crash at any point ends, after a rerun, in exactly the
// output of one clean run.
struct Checkpoint {
    std::uint64_t records_done = 0;
    std::map<std::string, std::uint64_t> file_bytes; // by role: "output", "dups"
    // Set by a run that finished: which input it read (input_identity in
    // owned_outputs.hpp). A rerun over the same input, after a kill between
    // that last commit and the exit, finds its outputs complete and leaves
    // them; a run over any other input starts them anew.
    std::optional<std::uint64_t> finished_input;
    // What the run had counted of its records_done (findings, rejects,
    // records written; by the summary's names): a run that resumes this
    // one, or repeats it, reports and exits on the whole input.
    std::map<std::string, std::uint64_t> counts;
};

class CheckpointStore {
public:
    virtual ~CheckpointStore() = default;

    // The checkpoint saved under `name`, if any.
    virtual std::optional<Checkpoint> load_checkpoint(std::string_view name) = 0;
    // Saves or deletes it within the transaction that commit() ends, so it
    // is durable exactly when the claims made with it are.
    virtual void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) = 0;
    virtual void clear_checkpoint(std::string_view name) = 0;
};

} // namespace idem::store
