#pragma once
// Internal to the store: fingerprints in memory, and the one rule that
// decides whether a claim is a first copy. The memory store is this table;
// the SQLite store keeps one as the index of its append-only log.

#include "idem/store/store.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

#include <sys/mman.h>

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

// Zeroed memory for a table, its pages mapped before the first probe. Left
// to fault in, a probe's first read maps the shared zero page and its first
// write copies it: two faults and a TLB shootdown per 4 KiB, in random
// order. Large tables ask for huge pages, which a claim's random probe also
// finds in the TLB.
inline void* map_zeroed(std::size_t bytes) {
    void* pages =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) throw std::bad_alloc();
    (void)::madvise(pages, bytes, MADV_HUGEPAGE);
    if (::madvise(pages, bytes, MADV_POPULATE_WRITE) != 0) {
        auto* bytes_at = static_cast<volatile char*>(pages);
        for (std::size_t at = 0; at < bytes; at += 4096)
            bytes_at[at] = 0;
    }
    return pages;
}

struct UnmapZeroed {
    std::size_t bytes = 0;
    void operator()(void* pages) const {
        if (pages) ::munmap(pages, bytes);
    }
};

// Open addressing with linear probing over one flat array: a claim costs
// one cache miss, not a node allocation and a pointer chase. The keys are
// cryptographic hashes, so their first bytes index the table directly.
class FingerprintTable {
public:
    // The entry for `key`, and whether it was just inserted (zeroed).
    std::pair<Entry*, bool> find_or_insert(const FingerprintBytes& key) {
        if (too_full(m_count + 1)) rehash(std::max<std::size_t>(m_capacity * 2, k_first_capacity));
        auto mask = m_capacity - 1;
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

    // Room for `entries` without growing: a run that knows roughly how many
    // records are coming moves each entry once instead of at every doubling
    // (about 1.4 times the entries in all, each a cache miss).
    void reserve(std::size_t entries) {
        entries = std::min(entries, k_most_reserved);
        auto capacity = std::max(m_capacity, k_first_capacity);
        while (entries * 10 > capacity * 7)
            capacity *= 2;
        if (capacity > m_capacity) rehash(capacity);
    }

    [[nodiscard]] Entry* find_mutable(const FingerprintBytes& key) {
        return const_cast<Entry*>(find(key));
    }

    [[nodiscard]] const Entry* find(const FingerprintBytes& key) const {
        if (m_capacity == 0) return nullptr;
        auto mask = m_capacity - 1;
        for (auto index = FingerprintBytesHash{}(key)&mask;; index = (index + 1) & mask) {
            const auto& slot = m_slots[index];
            if (slot.entry.seen_count == 0) return nullptr;
            if (slot.key == key) return &slot.entry;
        }
    }

    [[nodiscard]] std::size_t size() const { return m_count; }

    // Removes entries that expired by `now`; returns how many.
    std::uint64_t remove_expired(Timestamp now) {
        if (m_capacity == 0) return 0;
        auto before = m_count;
        rehash(m_capacity, [&](const Entry& entry) { return entry.expires_at > now; });
        return before - m_count;
    }

private:
    struct Slot {
        FingerprintBytes key;
        Entry entry;
    };
    // All-zero bytes are an empty slot.
    static_assert(std::is_trivially_copyable_v<Slot> && std::is_trivially_destructible_v<Slot>);
    static constexpr std::size_t k_first_capacity = 1 << 16;
    // A reservation is memory held whether the entries come or not (a log of
    // few events repeated): at most 192 MiB of it; past that, the table grows.
    static constexpr std::size_t k_most_reserved = 2'000'000;

    [[nodiscard]] bool too_full(std::size_t entries) const { return entries * 10 > m_capacity * 7; }

    template <typename Keep = bool (*)(const Entry&)>
    void rehash(
        std::size_t capacity, Keep keep = [](const Entry&) { return true; }) {
        auto bytes = capacity * sizeof(Slot);
        std::unique_ptr<Slot[], UnmapZeroed> old(static_cast<Slot*>(map_zeroed(bytes)),
                                                 UnmapZeroed{bytes});
        std::swap(old, m_slots);
        auto old_capacity = std::exchange(m_capacity, capacity);
        m_count = 0;
        for (std::size_t i = 0; i < old_capacity; ++i)
            if (old[i].entry.seen_count != 0 && keep(old[i].entry))
                *find_or_insert(old[i].key).first = old[i].entry;
    }

    std::unique_ptr<Slot[], UnmapZeroed> m_slots;
    std::size_t m_capacity = 0; // a power of two, or 0
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
