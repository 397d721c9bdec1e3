#pragma once
// What the sequencer (order/sequencer.hpp) keeps between runs: where each
// partition stands and the records it holds back. The store's sequencer
// role (store/sequencer_state.hpp) saves and loads these rows as they are.

#include "idem/util/time.hpp"

#include <compare>
#include <cstdint>
#include <string>
#include <vector>

namespace idem::order {

// A position in a partition's order: a sequence number, or an event time
// in microseconds with a hybrid logical clock's counter.
struct OrderKey {
    std::int64_t primary = 0;
    std::uint64_t secondary = 0;
    friend auto operator<=>(const OrderKey&, const OrderKey&) = default;
};

struct PartitionProgress {
    std::string partition; // the encoded partition key
    bool started = false;  // false: its first sequence is not known yet
    OrderKey next;         // sequence: the next to release; time: the last released
    OrderKey highest;      // time: the highest stamp seen
};

struct HeldRecordRow {
    std::uint64_t id = 0; // arrival order, kept across runs
    std::string partition;
    OrderKey key;
    Timestamp arrival; // when it started waiting (event time or wall clock)
    std::string bytes;
};

// What changed since the last save: progress of the partitions that moved,
// records newly held, and held records (by id) that were released.
struct ReorderChanges {
    std::vector<PartitionProgress> progress;
    std::vector<HeldRecordRow> held;
    std::vector<std::uint64_t> released;
    [[nodiscard]] bool empty() const {
        return progress.empty() && held.empty() && released.empty();
    }
};

} // namespace idem::order
