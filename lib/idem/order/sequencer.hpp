#pragma once
// The sliding-window sequencer behind `idem reorder` and `idem states`
// (docs/reorder.md), as pure logic. Records are offered one at a time with their partition and
// order key; the sequencer releases them in order per partition, reports the
// sequence numbers it had to skip, and says which records are late or
// duplicates. It does no I/O: releases and gaps go to the SequencerEvents the
// caller gives, and what must persist is taken out with take_changes().

#include "idem/order/sequencer_state.hpp"
#include "idem/util/time.hpp"

#include "idem/util/string_map.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::order {

// sequence: by an integer sequence per partition, with gaps; time: by event
// time (or hybrid logical clock) under a watermark.
enum class OrderMode { sequence, time };

struct SequencerOptions {
    OrderMode mode = OrderMode::sequence;
    // Where a partition without a checkpoint starts; none: at the smallest
    // sequence seen while its window fills.
    std::optional<std::int64_t> start;
    std::size_t window = 1000;     // records held per partition, at most
    std::size_t max_held = 100000; // records held overall, at most
    Duration gap_timeout{0};       // sequence mode; 0: gaps wait for the window
    Duration max_lateness{0};      // time mode: the watermark trails the highest stamp by this
};

// A record waiting for its predecessors. Compact: a stream may hold hundreds
// of thousands of small records, and what each costs beyond its bytes counts.
struct HeldRecord {
    HeldRecord(std::uint64_t id_, OrderKey key_, Timestamp arrival_, std::string_view bytes_,
               bool persisted_)
        : key(key_), id(id_), arrival(arrival_), persisted(persisted_),
          m_bytes(std::make_unique_for_overwrite<char[]>(bytes_.size())), m_size(bytes_.size()) {
        std::copy(bytes_.begin(), bytes_.end(), m_bytes.get());
    }
    [[nodiscard]] std::string_view bytes() const { return {m_bytes.get(), m_size}; }

    OrderKey key;
    std::uint64_t id = 0; // arrival order, kept across runs
    Timestamp arrival;
    bool persisted = false; // in the store as of the last save

private:
    std::unique_ptr<char[]> m_bytes;
    std::size_t m_size = 0;
};

// Kept small: a stream may have hundreds of thousands of partitions.
// What pass_in_order() reads (the next record of a partition, in order,
// for almost every record) comes first: 48 bytes, at most two cache lines.
struct Partition {
    // The encoded partition key (the sequencer's map holds it).
    [[nodiscard]] const std::string& key() const { return *encoded_key; }
    bool started = false;
    bool dirty = false;           // progress changed since take_changes()
    OrderKey next;                // sequence: the next to release; time: the last released
    std::vector<HeldRecord> held; // ascending by (key, id)
    static constexpr std::size_t k_hot_bytes = 48;
    const std::string* encoded_key = nullptr;
    OrderKey highest;            // time: the highest stamp seen
    std::uint64_t oldest_id = 0; // while something is held: its oldest record's id
    Timestamp waiting_since;     // ... and the earliest arrival among them
};
// NOLINTNEXTLINE(bugprone-sizeof-container): the member's bytes in the layout, not its size
static_assert(offsetof(Partition, held) + sizeof(Partition::held) <= Partition::k_hot_bytes);

class SequencerEvents {
public:
    virtual ~SequencerEvents() = default;
    // The next record of `partition`, in order.
    virtual void release(const Partition& partition, std::string_view bytes) = 0;
    // Sequences `from`..`to` (inclusive) of `partition` were skipped.
    virtual void gap(const Partition& partition, std::int64_t from, std::int64_t to) = 0;
};

enum class Verdict { accepted, late, duplicate };

struct Offer {
    Verdict verdict = Verdict::accepted;
    // late: the lowest key still in order when it came; duplicate: its own.
    OrderKey expected;
};

struct SequencerCounts {
    std::uint64_t released = 0;
    std::uint64_t gaps = 0;
    std::uint64_t missing = 0;  // sequence numbers inside the gaps
    std::uint64_t timeouts = 0; // gaps skipped because they waited --gap-timeout
    std::uint64_t late = 0;
    std::uint64_t duplicates = 0;
    std::uint64_t held = 0;
    std::uint64_t held_bytes = 0;
    std::uint64_t peak_held = 0;
    std::uint64_t peak_held_bytes = 0;
};

class Sequencer {
public:
    Sequencer(SequencerOptions options, SequencerEvents& events);
    Sequencer(const Sequencer&) = delete;
    Sequencer& operator=(const Sequencer&) = delete;

    [[nodiscard]] Partition* find(std::string_view key);
    // A partition seen for the first time in this run, with what the store
    // knows of it.
    Partition& add(std::string key, const std::optional<order::PartitionProgress>& progress);
    // Records a previous run held (their partitions added first). What can
    // go is released at once.
    void restore(std::vector<order::HeldRecordRow> rows);

    // The caller writes nothing for an accepted record: it is released (now
    // or later) through the events. Late and duplicate records are the
    // caller's to route.
    Offer offer(Partition& partition, OrderKey key, std::string_view bytes, Timestamp arrival);
    // Sequence mode, the common case made cheaper: when `key` is exactly
    // the next of a partition holding nothing, it counts as released and
    // the partition moves on, and the caller handles the record itself
    // (no copy into the sequencer, no release() call). False: offer() it.
    bool pass_in_order(Partition& partition, OrderKey key);
    // The same shortcut kept by a caller with many partitions that would
    // rather not read each one for every record (or not make one for a
    // key whose records all come in order): whether a partition's next
    // record would pass now (sequence mode, started, nothing held); and,
    // later, that the caller passed `count` records itself and the next is
    // `next` (counted as released, progress to save). Until told, the
    // partition's progress is behind, so the caller tells before it offers
    // that partition anything and before progress is saved.
    [[nodiscard]] bool passes_in_order(const Partition& partition) const {
        return m_options.mode == OrderMode::sequence && partition.started && partition.held.empty();
    }
    void passed_in_order(Partition& partition, std::int64_t next, std::uint64_t count);
    // Skips the gaps that have waited --gap-timeout by `now`.
    void advance_clock(Timestamp now);
    // End of input: every held record, in order, gaps reported.
    void flush();

    // Progress that moved, records newly held, held records released, since
    // the last call: what the caller saves with its next commit. Handed to
    // `save` in pieces of at most `chunk` items, so that a commit never
    // copies the whole state at once.
    void drain_changes(const std::function<void(const order::ReorderChanges&)>& save,
                       std::size_t chunk = 4096);
    // The same, in one piece (for tests).
    order::ReorderChanges take_changes();
    // Forgets partitions with nothing held and nothing unsaved (the store
    // knows them); returns how many.
    std::size_t forget_idle();

    [[nodiscard]] std::size_t partitions() const { return m_partitions.size(); }
    [[nodiscard]] const SequencerCounts& counts() const { return m_counts; }
    [[nodiscard]] std::optional<Timestamp> next_deadline() const;

private:
    Offer offer_by_sequence(Partition& partition, OrderKey key, std::string_view bytes,
                            Timestamp arrival);
    Offer offer_by_time(Partition& partition, OrderKey key, std::string_view bytes,
                        Timestamp arrival);
    void hold(Partition& partition, std::vector<HeldRecord>::iterator position, OrderKey key,
              std::string_view bytes, Timestamp arrival);
    void enforce_bounds(Partition& partition);
    void release_ready(Partition& partition);
    void force_one(Partition& partition);
    void emit(Partition& partition, std::string_view bytes);
    void drop_front(Partition& partition, std::size_t count);
    void refresh_waiting(Partition& partition);
    void set_waiting(Partition& partition, std::uint64_t oldest_id, Timestamp waiting_since);
    void clear_waiting(Partition& partition);
    void mark_dirty(Partition& partition);
    [[nodiscard]] OrderKey watermark(const Partition& partition) const;

    SequencerOptions m_options;
    SequencerEvents& m_events;
    StringMap<Partition> m_partitions;
    // Partitions holding something: by their oldest record (--max-held lets
    // the longest-blocked go first), and by when their gap times out.
    std::set<std::pair<std::uint64_t, Partition*>> m_blocked;
    std::set<std::pair<Timestamp, Partition*>> m_deadlines;
    std::vector<Partition*> m_dirty;
    std::vector<std::uint64_t> m_released_ids;
    std::uint64_t m_next_id = 1;
    SequencerCounts m_counts;
};

} // namespace idem::order
