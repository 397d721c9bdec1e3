#pragma once
// Internal to the SQLite store: where a value lives in its index's slots
// (FingerprintSlots), and a walk of the slots in the order of the values'
// 32 bits, which a merge of two tables streams from (write_merged).

#include "idem/store/detail/fingerprint_table.hpp" // release_pages

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace idem::store::detail {

// log2 of a power-of-two slot count.
inline unsigned slot_shift_of(std::size_t capacity) {
    unsigned shift = 0;
    while ((std::size_t{1} << shift) < capacity)
        ++shift;
    return shift;
}

// A value's home slot: the top bits of the 32 kept, so slots stay in the
// order of their bits and a table can grow from its own slots.
inline std::size_t slot_home(std::uint32_t bits, unsigned shift) {
    return static_cast<std::size_t>(bits) >> (32 - shift);
}

// A table's values in the order of their 32 bits. A value sits in the
// cluster (run of filled slots) that its home slot is in, and homes
// follow the bits, so the clusters in slot order, each sorted, are that
// order; but for values that ran past the last slot into the first
// ones, which belong with the last cluster. `replaced` values are
// passed over; `release` gives pages walked past back to the page
// cache (only for slots mapped from a file: anonymous memory would
// come back zeroed).
class SlotsInBitsOrder {
public:
    SlotsInBitsOrder(const std::uint64_t* slots, std::size_t capacity,
                     const std::unordered_set<std::uint64_t>* replaced, bool release)
        : m_slots(slots), m_capacity(capacity), m_shift(slot_shift_of(capacity)),
          m_replaced(replaced), m_release(release) {
        // The first cluster: values whose home is past their slot
        // wrapped, and wait for the last one.
        for (; m_scan < m_capacity && m_slots[m_scan] != 0; ++m_scan) {
            auto value = m_slots[m_scan];
            if (skipped(value)) continue;
            bool ran_past_the_end =
                slot_home(static_cast<std::uint32_t>(value >> 32), m_shift) > m_scan;
            (ran_past_the_end ? m_wrapped : m_cluster).push_back(value);
        }
        if (m_scan == m_capacity) take_wrapped(); // no empty slot: one cluster
        sort_cluster();
    }

    bool next(std::uint64_t& value) {
        while (m_at == m_cluster.size())
            if (!next_cluster()) return false;
        value = m_cluster[m_at++];
        return true;
    }

private:
    [[nodiscard]] bool skipped(std::uint64_t value) const {
        return m_replaced != nullptr && !m_replaced->empty() && m_replaced->count(value) != 0;
    }

    // Clusters are short (a few slots at 80% full) and mostly in order
    // already (a file written by a merge is in order throughout): an
    // insertion sort, which passes over values in order, beats std::sort's
    // set-up on them; a long one goes to std::sort.
    void sort_cluster() {
        constexpr std::size_t k_short = 32;
        if (m_cluster.size() > k_short) {
            std::sort(m_cluster.begin(), m_cluster.end());
            return;
        }
        for (std::size_t i = 1; i < m_cluster.size(); ++i) {
            auto value = m_cluster[i];
            auto j = i;
            for (; j > 0 && m_cluster[j - 1] > value; --j)
                m_cluster[j] = m_cluster[j - 1];
            m_cluster[j] = value;
        }
    }

    void take_wrapped() {
        m_cluster.insert(m_cluster.end(), m_wrapped.begin(), m_wrapped.end());
        m_wrapped.clear();
    }

    bool next_cluster() {
        m_cluster.clear();
        m_at = 0;
        // Locals: the members would be read again after every push_back.
        const auto* slots = m_slots;
        auto capacity = m_capacity;
        auto scan = m_scan;
        while (scan < capacity && slots[scan] == 0)
            ++scan;
        if (scan == capacity && m_wrapped.empty()) {
            m_scan = scan;
            release_behind(capacity);
            return false;
        }
        bool any_replaced = m_replaced != nullptr && !m_replaced->empty();
        for (; scan < capacity; ++scan) {
            auto value = slots[scan];
            if (value == 0) break;
            if (!any_replaced || m_replaced->count(value) == 0) m_cluster.push_back(value);
        }
        m_scan = scan;
        if (scan == capacity) take_wrapped();
        sort_cluster();
        release_behind(m_scan);
        return true;
    }

    // Gives back the whole pages of slots before `end`, 2 MiB at a time
    // and the rest at the end: their values are copied out by then.
    void release_behind(std::size_t end) {
        constexpr std::size_t k_page_slots = k_small_page_bytes / sizeof(std::uint64_t);
        constexpr std::size_t k_every = std::size_t{1} << 18; // 2 MiB of slots
        if (!m_release) return;
        auto until = end / k_page_slots * k_page_slots;
        if (until < m_released + k_every && end != m_capacity) return;
        if (until > m_released)
            release_pages(m_slots + m_released, (until - m_released) * sizeof(std::uint64_t));
        m_released = until;
    }

    const std::uint64_t* m_slots;
    std::size_t m_capacity;
    unsigned m_shift;
    const std::unordered_set<std::uint64_t>* m_replaced;
    bool m_release;
    std::size_t m_scan = 0;
    std::size_t m_released = 0;
    std::vector<std::uint64_t> m_cluster;
    std::size_t m_at = 0;
    std::vector<std::uint64_t> m_wrapped;
};

} // namespace idem::store::detail
