#pragma once
// The sequencer role (reorder, states): where each partition of a stream
// stands and what it holds, so that the next run resumes where this one
// stopped.

#include "idem/order/sequencer_state.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

// The rows are the sequencer's own (order/sequencer_state.hpp); every
// backend keeps them as they are.
using order::HeldRecordRow;
using order::OrderKey;
using order::PartitionProgress;
using order::ReorderChanges;

class SequencerStore {
public:
    virtual ~SequencerStore() = default;

    // Progress of each named partition (nullopt when the store has none).
    virtual std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) = 0;
    // Every held record, in arrival order.
    virtual std::vector<HeldRecordRow> load_held(std::string_view scope) = 0;
    // Saved within the transaction that commit() ends.
    virtual void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) = 0;
    // Forgets the scope's progress and held records (`reorder --reset`).
    virtual void clear_reorder_state(std::string_view scope) = 0;
};

} // namespace idem::store
