#pragma once
// Internal to states: the entities' states and the run's own progress as a
// store keeps them (saved_entities.cpp). A run with a store asks it for
// every entity a block meets that the checker does not know yet, and saves
// what changed at each commit, in the transaction that commits the output
// (store::OwnedOutputs). Without a store (`:memory:`, --learn) a run has
// none of this.

#include "idem/order/sequencer.hpp"
#include "idem/states/checker.hpp"
#include "idem/states/detail/in_order.hpp"
#include "idem/states/detail/worker.hpp"
#include "idem/store/store.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace idem::states::detail {

// The run's own state beside the entities: the latest event time (stuck is
// measured from it), the arrival counter that breaks ties in time order,
// and where in the input the last stuck report was made.
struct RunProgress {
    Timestamp latest = Timestamp::min();
    std::uint64_t arrivals = 0;
    std::uint64_t stuck_at = 0;
};

class SavedEntities {
public:
    // `sequencer` and `in_order` are null unless the run orders its events;
    // each outlives this.
    SavedEntities(store::Store& store, std::string scope, std::string sequencer_scope,
                  Checker& checker, order::Sequencer* sequencer, InOrderEntities* in_order);

    // What the run this one continues saved of its own progress (the
    // defaults when none did).
    [[nodiscard]] RunProgress load_progress();

    // The entities of a block that this run has not met yet: their state
    // and order from the store, in one call for the whole block.
    void load_unmet(const BlockResult& block);
    // These entities' state and order from the store (a partition each when
    // the run orders its events, whether or not the store had one).
    void load(const std::vector<std::string>& entities);

    // The events a run killed with -o left waiting in the sequencer, their
    // entities loaded first.
    [[nodiscard]] std::vector<store::HeldRecordRow> load_held();

    // Every entity changed since the last save, the run's progress and the
    // sequencer's changes, into the store's open transaction.
    void save(const RunProgress& progress);

    // Entities whose state a run before this one left.
    [[nodiscard]] std::uint64_t resumed() const { return m_resumed; }

private:
    store::Store& m_store;
    std::string m_scope;
    std::string m_sequencer_scope;
    Checker& m_checker;
    order::Sequencer* m_sequencer;
    InOrderEntities* m_in_order;
    std::uint64_t m_resumed = 0;
};

} // namespace idem::states::detail
