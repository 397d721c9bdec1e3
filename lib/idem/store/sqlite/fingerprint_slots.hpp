#pragma once
// Internal to the SQLite store: the index of its fingerprint log that a
// process holds in memory, 8 bytes a slot: a fingerprint's first 32 bits and
// the log row (seq) of its first copy. Everything else about a fingerprint
// (when it was first seen, when it expires, how many copies came) is in
// that row, read when a slot matches; a fingerprint that matches no slot is
// certainly new and costs no read. At most 80% full, 50 million
// fingerprints take 512 MiB (docs/dedup.md, "The SQLite store's memory").
//
// The slots are a linear-probing table whose home position is the top bits
// of the 32 it keeps, so the table can grow without the fingerprints
// themselves, and is saved as it is. A process opening a store does not
// load the saved table: it maps its file read-only (SavedSlots; the pages
// are the page cache's, shared by every process on the store, and only the
// ones probed are touched) and keeps what it changes in a table of its own
// above it, so opening costs what changed since the save, not the store's
// size.
//
// One class past ~400 lines, in a header, on purpose: every claim of a
// dedup run probes it, and the probe, the two tables and their merge are
// inline so the per-record path stays one call deep.

#include "idem/store/detail/fingerprint_table.hpp" // map_zeroed
#include "idem/store/fingerprints.hpp"
#include "idem/store/sqlite/slot_order.hpp"
#include "idem/util/prefetch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <unordered_set>
#include <utility>
#include <vector>

namespace idem::store::detail {

// Slots saved whole by an earlier process, read-only: `mapping` keeps
// `slots` valid (saved_slots_file.hpp maps them from the store's file).
struct SavedSlots {
    std::shared_ptr<const void> mapping;
    const std::uint64_t* slots = nullptr;
    std::size_t capacity = 0; // a power of two, at most 80% full
    std::size_t entries = 0;
    // The slots are a file's pages: dropped from memory, they are read
    // again from it (a merge gives back what it walked past).
    bool from_file = false;
};

class FingerprintSlots {
public:
    // A fingerprint's place: its slot, and its first copy's row when found.
    struct Place {
        std::size_t slot = 0;
        std::int64_t seq = 0; // 0: not found; `slot` is the empty one where it would go
        bool saved = false;   // `slot` is one of the saved slots (found there)
    };

    // Rows are kept as offsets from `base`, in 32 bits: a row before base+1
    // or from base+2^32 on does not fit (fits() says), and the store then
    // builds the index again from a later base.
    FingerprintSlots() = default;
    explicit FingerprintSlots(std::int64_t base) : m_base(base) {}
    // Above slots saved whole with `base`: they are read, never written.
    FingerprintSlots(SavedSlots saved, std::int64_t base)
        : m_saved(std::move(saved)), m_base(base) {
        if (m_saved.capacity == 0 || (m_saved.capacity & (m_saved.capacity - 1)) != 0)
            throw std::invalid_argument("saved slot count is not a power of two");
        m_saved_shift = shift_of(m_saved.capacity);
        m_entries = m_saved.entries;
    }

    [[nodiscard]] bool fits(std::int64_t seq) const {
        return seq > m_base && seq - m_base < (std::int64_t{1} << 32);
    }
    [[nodiscard]] std::int64_t base() const { return m_base; }
    // Fingerprints held, saved or put since.
    [[nodiscard]] std::size_t size() const { return m_entries; }
    // The slots this process holds (above the saved ones, if any).
    [[nodiscard]] std::size_t capacity() const { return m_capacity; }
    [[nodiscard]] bool has_saved() const { return m_saved.capacity != 0; }

    // The fingerprint's row: the slots whose 32 bits are the key's are
    // offered to `is_it(seq)` in probe order, the saved ones first (it
    // reads the row and says whether it is this fingerprint's). Rows gone
    // from the log (collected garbage) answer false and are passed over.
    // `in_saved` false skips the saved slots: a caller that saw none of them
    // hold the key's bits (for_each_candidate) knows they never will.
    template <class IsIt>
    Place find(const FingerprintBytes& key, IsIt&& is_it, bool in_saved = true) const {
        auto bits = bits_of(key);
        Place found;
        auto take = [&](std::size_t index, std::uint64_t slot) {
            found.slot = index;
            found.seq = row_of(slot);
            return is_it(found.seq);
        };
        if (in_saved && walk_saved(bits, take)) {
            found.saved = true;
            return found;
        }
        if (m_capacity == 0) return {};
        auto [index, took] = walk_held(bits, take);
        return took ? found : Place{index, 0};
    }

    // Every row whose slot holds the key's 32 bits, as visit(seq, saved):
    // what find() would offer is_it, without stopping at a match.
    template <class Visit>
    void for_each_candidate(const FingerprintBytes& key, Visit&& visit) const {
        auto bits = bits_of(key);
        walk_saved(bits, [&](std::size_t, std::uint64_t slot) {
            visit(row_of(slot), true);
            return false;
        });
        if (m_capacity == 0) return;
        walk_held(bits, [&](std::size_t, std::uint64_t slot) {
            visit(row_of(slot), false);
            return false;
        });
    }

    // Starts loading the key's home slots: a batch prefetches some claims
    // ahead, as a random probe into a large table misses the caches.
    void prefetch(const FingerprintBytes& key) const {
        auto bits = bits_of(key);
        if (m_saved.capacity != 0) idem::prefetch(&m_saved.slots[home(bits, m_saved_shift)]);
        if (m_capacity != 0) idem::prefetch(&m_slots[home(bits, m_shift)]);
    }

    // What a put did to the table, as slot values (`base` relative): the
    // value put, and the one it replaced (0 when it filled an empty slot).
    // Values, not positions: a list of changes applies to a table of any
    // capacity holding the same fingerprints (a saved delta, below).
    struct Change {
        std::uint64_t put = 0;
        std::uint64_t replaced = 0;
    };

    // Records `seq` as the key's first copy at `place`, found by find() with
    // nothing put since: a found slot is rewritten (a saved one is passed
    // over from now on, and the value put in this process's table), an
    // empty one filled (growing the table first when it is full).
    Change put(const FingerprintBytes& key, const Place& place, std::int64_t seq) {
        if (!fits(seq)) throw std::out_of_range("fingerprint row outside the index's range");
        auto slot = (std::uint64_t{bits_of(key)} << 32) | static_cast<std::uint64_t>(seq - m_base);
        if (place.seq != 0 && place.saved) {
            auto replaced = m_saved.slots[place.slot];
            m_replaced_in_saved.insert(replaced);
            fill(slot, k_anywhere);
            return {slot, replaced};
        }
        if (place.seq != 0 && m_capacity != 0) {
            auto replaced = m_slots[place.slot];
            m_slots[place.slot] = slot;
            return {slot, replaced};
        }
        fill(slot, place.slot);
        ++m_entries;
        return {slot, 0};
    }

    // The row a change put (absolute).
    [[nodiscard]] std::int64_t seq_of(const Change& change) const { return row_of(change.put); }

    // Replays changes another process made to a table holding the same
    // fingerprints, in their order, each slot asked for a few changes ahead.
    // False when one does not fit this table (a value it should replace is
    // not here, or a value is no slot's): the caller drops the table.
    bool apply(const Change* changes, std::size_t count) {
        constexpr std::size_t k_ahead = 16;
        for (std::size_t i = 0; i < count; ++i) {
            if (i + k_ahead < count && m_capacity != 0)
                idem::prefetch(&m_slots[home(
                    static_cast<std::uint32_t>(changes[i + k_ahead].put >> 32), m_shift)]);
            const auto& change = changes[i];
            if ((change.put & 0xffffffffU) == 0) return false; // seq == base: never a row
            if (change.replaced == 0) {
                fill(change.put, k_anywhere);
                ++m_entries;
                continue;
            }
            if ((change.replaced >> 32) != (change.put >> 32)) return false;
            if (auto* held = held_slot(change.replaced)) {
                *held = change.put;
                continue;
            }
            if (!saved_holds(change.replaced)) return false;
            m_replaced_in_saved.insert(change.replaced);
            fill(change.put, k_anywhere);
        }
        return true;
    }

    // Room for `entries` without growing: growing holds the old table and
    // the new one at once, so a run that knows its size sets it first. At
    // most 2^26 slots (512 MiB) are reserved ahead. Above saved slots, only
    // the fingerprints beyond those take room here.
    void reserve(std::size_t entries) {
        auto needed = m_filled + (entries > m_entries ? entries - m_entries : 0);
        auto capacity = std::max(m_capacity, k_first_capacity);
        while (too_full_at(needed, capacity) && capacity < k_most_reserved_slots)
            capacity *= 2;
        if (capacity > m_capacity) grow(capacity);
    }

    // How many slots hold a fingerprint, counted (size() is what was put,
    // or what the saved table says it holds).
    [[nodiscard]] std::size_t occupied() const {
        std::size_t count = 0;
        for (std::size_t index = 0; index < m_capacity; ++index)
            count += m_slots[index] != 0 ? 1U : 0U;
        for (std::size_t index = 0; index < m_saved.capacity; ++index)
            count += m_saved.slots[index] != 0 ? 1U : 0U;
        return count - m_replaced_in_saved.size();
    }

    // The slots as saved (little-endian machine words), and room to load
    // them back: `capacity` a power of two, zeroed, to be filled through
    // data() with `entries` taken. Only for a table with nothing saved under
    // it (merged() makes one).
    [[nodiscard]] const std::uint64_t* data() const { return m_slots.get(); }
    std::uint64_t* assign(std::size_t capacity, std::size_t entries, std::int64_t base) {
        if (capacity == 0 || (capacity & (capacity - 1)) != 0)
            throw std::invalid_argument("slot count is not a power of two");
        m_saved = {};
        m_replaced_in_saved.clear();
        allocate(capacity);
        m_entries = m_filled = entries;
        m_base = base;
        return m_slots.get();
    }

    // Where a merge streams its slots: `count` words for the slots from
    // `first` on. False stops the merge.
    using PutSlots =
        std::function<bool(std::size_t first, const std::uint64_t* words, std::size_t count)>;

    // The slot count of the merged table: at most 80% full.
    [[nodiscard]] std::size_t merged_capacity() const {
        auto capacity = k_first_capacity;
        while (too_full_at(m_entries, capacity))
            capacity *= 2;
        return capacity;
    }

    // The fingerprints held, saved and put since, as one table of
    // merged_capacity() slots, given to `put` a piece of `piece_slots` at a
    // time: the pieces from the second on in order, the first last. Both
    // tables are read in the order of their 32 bits, a cluster of filled
    // slots at a time, and each value goes to the first free slot from its
    // home, which in that order only moves forward: no merged table is held
    // in memory (at 60M fingerprints it was 1 GiB beside the mapped file and
    // this process's table). Values that run past the last slot wrap into
    // the first piece, held back for them. Saved slots read are given back
    // to the page cache as the walk passes them (SavedSlots::from_file).
    // False when `put` refuses, when the values that wrapped do not fit in
    // the first piece (one cluster longer than a piece), when the tables do
    // not come out in order (damaged), or when they hold another count of
    // fingerprints than size(): merged() then.
    bool write_merged(const PutSlots& put, std::size_t piece_slots = k_merge_piece_slots) const {
        auto capacity = merged_capacity();
        auto shift = shift_of(capacity);
        piece_slots = std::min(piece_slots, capacity);
        if (piece_slots == 0) return false;
        std::vector<std::uint64_t> first(piece_slots);
        std::vector<std::uint64_t> piece(piece_slots);
        std::uint64_t* filling = first.data();
        std::size_t piece_start = 0;
        std::size_t next_free = 0;
        std::size_t placed = 0;
        std::vector<std::uint64_t> wrapped;
        auto next_piece = [&] {
            if (piece_start != 0) {
                if (!put(piece_start, piece.data(), piece_slots)) return false;
                std::fill(piece.begin(), piece.end(), 0);
            }
            piece_start += piece_slots;
            filling = piece.data();
            return true;
        };
        std::size_t last_home = 0;
        auto place = [&](std::uint64_t value) {
            ++placed;
            auto value_home = home(static_cast<std::uint32_t>(value >> 32), shift);
            // Out of order (a damaged file): laid out this way, a probe from
            // the value's home could stop short of it.
            if (value_home < last_home) return false;
            last_home = value_home;
            auto at = std::max(value_home, next_free);
            if (at >= capacity) {
                wrapped.push_back(value);
                return true;
            }
            while (at >= piece_start + piece_slots)
                if (!next_piece()) return false;
            filling[at - piece_start] = value;
            next_free = at + 1;
            return true;
        };
        SlotsInBitsOrder saved(m_saved.slots, m_saved.capacity, &m_replaced_in_saved,
                               m_saved.from_file);
        SlotsInBitsOrder held(m_slots.get(), m_capacity, nullptr, false);
        std::uint64_t from_saved = 0;
        std::uint64_t from_held = 0;
        bool more_saved = saved.next(from_saved);
        bool more_held = held.next(from_held);
        while (more_saved || more_held) {
            bool take_saved = more_saved && (!more_held || (from_saved >> 32) <= (from_held >> 32));
            if (!place(take_saved ? from_saved : from_held)) return false;
            if (take_saved)
                more_saved = saved.next(from_saved);
            else
                more_held = held.next(from_held);
        }
        while (piece_start < capacity)
            if (!next_piece()) return false;
        std::size_t free_at = 0;
        for (auto value : wrapped) {
            while (free_at < piece_slots && first[free_at] != 0)
                ++free_at;
            if (free_at == piece_slots) return false;
            first[free_at] = value;
        }
        return placed == m_entries && put(0, first.data(), piece_slots);
    }

    // The same fingerprints as one table in memory, with nothing saved under
    // it, each value put by a probe from its home: what a save whole falls
    // back on when write_merged cannot stream. Nullopt when the tables hold
    // another count of fingerprints than size().
    [[nodiscard]] std::optional<FingerprintSlots> merged() const {
        FingerprintSlots whole(m_base);
        whole.allocate(merged_capacity());
        std::size_t taken = 0;
        auto take = [&](std::uint64_t slot) {
            if (slot == 0) return true;
            // More than counted: the table could fill up (no empty slot to
            // end a probe).
            if (taken++ == m_entries) return false;
            whole.m_slots[whole.empty_slot_for(slot)] = slot;
            return true;
        };
        for (std::size_t index = 0; index < m_saved.capacity; ++index)
            if (!replaced_in_saved(m_saved.slots[index]) && !take(m_saved.slots[index]))
                return std::nullopt;
        for (std::size_t index = 0; index < m_capacity; ++index)
            if (!take(m_slots[index])) return std::nullopt;
        if (taken != m_entries) return std::nullopt;
        whole.m_entries = whole.m_filled = m_entries;
        return whole;
    }

private:
    static constexpr std::size_t k_first_capacity = 1 << 16;
    static constexpr std::size_t k_most_reserved_slots = std::size_t{1} << 26;
    static constexpr std::size_t k_merge_piece_slots = std::size_t{1} << 17; // 1 MiB

    [[nodiscard]] static bool too_full_at(std::size_t entries, std::size_t capacity) {
        return entries * 5 > capacity * 4; // 80%
    }

    static std::uint32_t bits_of(const FingerprintBytes& key) {
        std::uint32_t bits = 0;
        std::memcpy(&bits, key.data(), sizeof bits);
        return bits;
    }

    static unsigned shift_of(std::size_t capacity) { return slot_shift_of(capacity); }

    [[nodiscard]] static std::size_t home(std::uint32_t bits, unsigned shift) {
        return slot_home(bits, shift);
    }

    [[nodiscard]] bool replaced_in_saved(std::uint64_t slot) const {
        return !m_replaced_in_saved.empty() && m_replaced_in_saved.count(slot) != 0;
    }

    // The row a slot value names (absolute).
    [[nodiscard]] std::int64_t row_of(std::uint64_t slot) const {
        return m_base + static_cast<std::int64_t>(slot & 0xffffffffU);
    }

    // Offers the saved slots holding `bits` (and not replaced since), in
    // probe order, to take(index, slot) until it returns true; says whether
    // one was taken. Bounded: saved slots come from a file, and a damaged
    // one may have no empty slot to end a probe at.
    template <class Take> bool walk_saved(std::uint32_t bits, Take&& take) const {
        if (m_saved.capacity == 0) return false;
        auto mask = m_saved.capacity - 1;
        auto index = home(bits, m_saved_shift);
        for (std::size_t step = 0; step < m_saved.capacity; ++step, index = (index + 1) & mask) {
            auto slot = m_saved.slots[index];
            if (slot == 0) return false;
            if ((slot >> 32) == bits && !replaced_in_saved(slot) && take(index, slot)) return true;
        }
        return false;
    }

    // The same through this process's table (not empty): the slot taken,
    // or the empty one the probe ended at, and whether one was taken.
    template <class Take>
    std::pair<std::size_t, bool> walk_held(std::uint32_t bits, Take&& take) const {
        auto mask = m_capacity - 1;
        for (auto index = home(bits, m_shift);; index = (index + 1) & mask) {
            auto slot = m_slots[index];
            if (slot == 0) return {index, false};
            if ((slot >> 32) == bits && take(index, slot)) return {index, true};
        }
    }

    // This process's slot holding `value`, or null.
    std::uint64_t* held_slot(std::uint64_t value) {
        if (m_capacity == 0) return nullptr;
        auto [index, took] =
            walk_held(static_cast<std::uint32_t>(value >> 32),
                      [&](std::size_t, std::uint64_t slot) { return slot == value; });
        return took ? &m_slots[index] : nullptr;
    }

    // Whether a saved slot holds `value`, not replaced since.
    [[nodiscard]] bool saved_holds(std::uint64_t value) const {
        return walk_saved(static_cast<std::uint32_t>(value >> 32),
                          [&](std::size_t, std::uint64_t slot) { return slot == value; });
    }

    static constexpr std::size_t k_anywhere = ~std::size_t{0};

    // Fills an empty slot of this process's table with `slot`: `at` when it
    // is known, else the first empty one from its home, growing the table
    // first when full.
    void fill(std::uint64_t slot, std::size_t at) {
        if (m_capacity == 0 || too_full_at(m_filled + 1, m_capacity)) {
            grow(std::max(m_capacity * 2, k_first_capacity));
            at = k_anywhere;
        }
        m_slots[at == k_anywhere ? empty_slot_for(slot) : at] = slot;
        ++m_filled;
    }

    [[nodiscard]] std::size_t empty_slot_for(std::uint64_t slot) const {
        auto mask = m_capacity - 1;
        auto index = home(static_cast<std::uint32_t>(slot >> 32), m_shift);
        while (m_slots[index] != 0)
            index = (index + 1) & mask;
        return index;
    }

    void allocate(std::size_t capacity) {
        auto bytes = capacity * sizeof(std::uint64_t);
        m_slots = {static_cast<std::uint64_t*>(map_zeroed(bytes)), UnmapZeroed{bytes}};
        m_capacity = capacity;
        m_shift = shift_of(capacity);
    }

    void grow(std::size_t capacity) {
        auto old = std::move(m_slots);
        auto old_capacity = m_capacity;
        allocate(capacity);
        for (std::size_t index = 0; index < old_capacity; ++index)
            if (auto slot = old.get()[index]; slot != 0) m_slots[empty_slot_for(slot)] = slot;
    }

    SavedSlots m_saved;
    unsigned m_saved_shift = 0;
    // Saved slots whose fingerprint was claimed anew since: their new value
    // is in this process's table (few: a first copy claimed again after it
    // expired).
    std::unordered_set<std::uint64_t> m_replaced_in_saved;
    std::unique_ptr<std::uint64_t[], UnmapZeroed> m_slots; // this process's
    std::size_t m_capacity = 0;                            // a power of two, or 0
    unsigned m_shift = 0;                                  // log2 of m_capacity
    std::size_t m_filled = 0;                              // of m_slots
    std::size_t m_entries = 0;                             // fingerprints, saved or here
    std::int64_t m_base = 0;
};

} // namespace idem::store::detail
