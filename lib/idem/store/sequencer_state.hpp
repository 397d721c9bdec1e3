#pragma once
// The sequencer role (reorder): where each partition of a stream stands and
// what it holds, so that the next run resumes where this one stopped.

#include "idem/util/time.hpp"
#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

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
