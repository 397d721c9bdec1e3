#pragma once
// Internal to the store: fingerprints in memory, and the one rule that
// decides whether a claim is a first copy. The memory store is this table;
// the SQLite store keeps one as the index of its append-only log.

#include "idem/store/store.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace idem::store::detail {

// 32 bytes: with its key, a table slot is 48, so a million fingerprints
// fit in about 100 MB.
struct Entry {
    Timestamp first_seen;
    Timestamp expires_at;
    std::uint32_t seen_count = 0;   // 0 marks an empty slot
    std::uint32_t first_source = 0; // the store's id for the source name
    std::uint64_t first_line = 0;
};

// Open addressing with linear probing over one flat array: a claim costs
// one cache miss, not a node allocation and a pointer chase. The keys are
// cryptographic hashes, so their first bytes index the table directly.
class FingerprintTable {
public:
    // The entry for `key`, and whether it was just inserted (zeroed).
    std::pair<Entry*, bool> find_or_insert(const FingerprintBytes& key) {
        if ((m_count + 1) * 10 > m_slots.size() * 7) grow();
        auto mask = m_slots.size() - 1;
        for (auto index = FingerprintBytesHash{}(key)&mask;; index = (index + 1) & mask) {
            auto& slot = m_slots[index];
            if (slot.entry.seen_count == 0) {
                slot.key = key;
                slot.entry = Entry{};
                ++m_count;
                return {&slot.entry, true};
            }
            if (slot.key == key) return {&slot.entry, false};
        }
    }

    [[nodiscard]] Entry* find_mutable(const FingerprintBytes& key) {
        return const_cast<Entry*>(find(key));
    }

    [[nodiscard]] const Entry* find(const FingerprintBytes& key) const {
        if (m_slots.empty()) return nullptr;
        auto mask = m_slots.size() - 1;
        for (auto index = FingerprintBytesHash{}(key)&mask;; index = (index + 1) & mask) {
            const auto& slot = m_slots[index];
            if (slot.entry.seen_count == 0) return nullptr;
            if (slot.key == key) return &slot.entry;
        }
    }

    [[nodiscard]] std::size_t size() const { return m_count; }

    // Removes entries that expired by `now`; returns how many.
    std::uint64_t remove_expired(Timestamp now) {
        std::vector<Slot> kept(m_slots.size());
        std::swap(kept, m_slots);
        auto before = m_count;
        m_count = 0;
        for (const auto& slot : kept)
            if (slot.entry.seen_count != 0 && slot.entry.expires_at > now)
                *find_or_insert(slot.key).first = slot.entry;
        return before - m_count;
    }

private:
    struct Slot {
        FingerprintBytes key{};
        Entry entry;
    };

    void grow() {
        std::vector<Slot> old(std::max<std::size_t>(m_slots.size() * 2, 1 << 16));
        std::swap(old, m_slots);
        m_count = 0;
        for (const auto& slot : old)
            if (slot.entry.seen_count != 0) *find_or_insert(slot.key).first = slot.entry;
    }

    std::vector<Slot> m_slots;
    std::size_t m_count = 0;
};

// Applies `claim` to the table: a new fingerprint, an expired one, or one
// whose first copy lies outside the claim's window makes this record the
// first copy; otherwise it is one more repeat. `source` is the caller's id
// for claim.source.
inline const Entry& decide(FingerprintTable& table, const FingerprintClaim& claim,
                           std::uint32_t source, Timestamp now) {
    auto [found, inserted] = table.find_or_insert(claim.fingerprint);
    auto& entry = *found;
    bool outside_window =
        claim.window.count() > 0 && claim.event_time - entry.first_seen > claim.window;
    if (inserted || entry.expires_at <= now || outside_window)
        entry = {claim.event_time, claim.expires_at, 1, source, claim.line};
    else
        ++entry.seen_count; // 4 billion copies of one event would wrap: not a concern
    return entry;
}

} // namespace idem::store::detail
