#pragma once
// The held-copy role (dedup --keep last -o FILE): the copies of each event
// a run holds until its window closes, committed with its checkpoint, so a
// resumed run holds again exactly what the killed one held.

#include "idem/store/fingerprints.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

struct HeldCopyRow {
    std::uint64_t id = 0; // the order it was held in, kept across runs
    FingerprintBytes fingerprint{};
    std::string source;
    std::uint64_t line = 0;
    Timestamp event_time;
    std::string bytes; // the record, whole
};

// What changed since the last save: copies newly held, and held copies (by
// id) that were let go.
struct HeldCopyChanges {
    std::vector<HeldCopyRow> held;
    std::vector<std::uint64_t> released;
    [[nodiscard]] bool empty() const { return held.empty() && released.empty(); }
};

class HeldCopyStore {
public:
    virtual ~HeldCopyStore() = default;

    // Every copy held under `name` (a run's checkpoint name), in id order.
    virtual std::vector<HeldCopyRow> load_held_copies(std::string_view name) = 0;
    // Saved within the transaction that commit() ends.
    virtual void save_held_copies(std::string_view name, const HeldCopyChanges& changes) = 0;
    virtual void clear_held_copies(std::string_view name) = 0;
};

} // namespace idem::store
