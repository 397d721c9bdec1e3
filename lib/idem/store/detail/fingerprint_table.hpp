#pragma once
// Internal to the store: fingerprints in memory, and the one rule that
// decides whether a claim is a first copy (the SQLite store applies it to
// the first copy's row it reads). The memory store is this table.

#include "idem/store/fingerprints.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/populated_ahead.hpp"
#include "idem/util/prefetch.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include <sys/mman.h>

namespace idem::store::detail {

// 32 bytes: with its key, 48 per fingerprint, so a million fingerprints
// take about 48 MB, and their index 16 MB more.
struct Entry {
    Timestamp first_seen;
    Timestamp expires_at;
    std::uint32_t seen_count = 0;
    std::uint32_t first_source = 0; // the store's id for the source name
    std::uint64_t first_line = 0;
};

// Zeroed memory for an index, its pages mapped before the first probe. Left
// to fault in, a probe's first read maps the shared zero page and its first
// write copies it: two faults and a TLB shootdown per 4 KiB, in random
// order. Huge pages, where granted, also keep random probes in the TLB.
inline void* map_zeroed(std::size_t bytes) {
    void* pages =
        ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) throw std::bad_alloc();
    (void)::madvise(pages, bytes, MADV_HUGEPAGE);
    if (!populate_pages(pages, bytes)) {
        auto* bytes_at = static_cast<volatile char*>(pages);
        for (std::size_t at = 0; at < bytes; at += k_small_page_bytes)
            bytes_at[at] = 0;
    }
    return pages;
}

// Drops pages of a read-only file mapping from this process: touched again,
// they come back from the page cache (or the file). Only whole pages.
inline void release_pages(const void* start, std::size_t bytes) {
    if (reinterpret_cast<std::uintptr_t>(start) % k_small_page_bytes != 0) return;
    (void)::madvise(const_cast<void*>(start), bytes / k_small_page_bytes * k_small_page_bytes,
                    MADV_DONTNEED);
}

struct UnmapZeroed {
    std::size_t bytes = 0;
    void operator()(void* pages) const {
        if (pages) ::munmap(pages, bytes);
    }
};

// How many claims ahead a store's batch asks for their slots (prefetch()):
// a large table's slots are not in the cache when a claim comes to them.
inline constexpr std::size_t k_claims_prefetched_ahead = 16;

// Fingerprints and their entries lie in one dense array, in the order they
// came; an open-addressing index (linear probing) of 8-byte slots finds
// them. The index is what a claim probes at random, at a sixth of the
// entries' size; a million fingerprints' index (16 MiB) is still more than
// a shared machine's cache holds (a dependent load at 8 MB cost ~110 ns
// here), so a batch of claims asks for each one's slot some claims ahead
// (prefetch()), and a new fingerprint then costs a cache hit and an
// append. The keys are cryptographic hashes, so their bytes index the
// table directly.
class FingerprintTable {
public:
    // The entry for `key`, and whether it was just inserted (zeroed). The
    // pointer holds until the next insertion.
    std::pair<Entry*, bool> find_or_insert(const FingerprintBytes& key) {
        if (too_full(m_stored.size() + 1))
            rebuild_index(std::max<std::size_t>(m_capacity * 2, k_first_capacity));
        auto& slot = m_slots[probe(key)];
        if (slot.position != 0) return {&m_stored[slot.position - 1].entry, false};
        if (m_stored.size() == m_stored.capacity()) m_populated.before_move();
        m_stored.push_back({key, Entry{}});
        m_populated.written(m_stored);
        slot = {tag_of(key), static_cast<std::uint32_t>(m_stored.size())};
        return {&m_stored.back().entry, true};
    }

    // Room for `entries` without growing: a run that knows roughly how many
    // records are coming moves each entry once instead of at every doubling.
    void reserve(std::size_t entries) {
        auto indexed = std::min(entries, k_most_reserved);
        auto capacity = std::max(m_capacity, k_first_capacity);
        while (indexed * 10 > capacity * 7)
            capacity *= 2;
        if (capacity > m_capacity) rebuild_index(capacity);
        try {
            m_populated.before_move();
            m_stored.reserve(std::min(entries, k_most_entries_reserved));
        } catch (const std::bad_alloc&) {
            // Only a hint: without the address space, the entries grow as
            // they come.
        }
    }

    [[nodiscard]] Entry* find_mutable(const FingerprintBytes& key) {
        return const_cast<Entry*>(find(key));
    }

    // Starts loading the key's home slot: a batch asks this some claims
    // ahead, so that the slot is in the cache when the claim is decided.
    void prefetch(const FingerprintBytes& key) const {
        if (m_capacity != 0) idem::prefetch(&m_slots[home(key)]);
    }

    [[nodiscard]] const Entry* find(const FingerprintBytes& key) const {
        if (m_capacity == 0) return nullptr;
        const auto& slot = m_slots[probe(key)];
        return slot.position == 0 ? nullptr : &m_stored[slot.position - 1].entry;
    }

    [[nodiscard]] std::size_t size() const { return m_stored.size(); }

    // Removes entries that expired by `now`; returns how many.
    std::uint64_t remove_expired(Timestamp now) {
        auto before = m_stored.size();
        std::erase_if(m_stored,
                      [&](const Stored& stored) { return stored.entry.expires_at <= now; });
        if (m_stored.size() != before) rebuild_index(m_capacity);
        return before - m_stored.size();
    }

private:
    struct Stored {
        FingerprintBytes key;
        Entry entry;
    };
    struct Slot {
        std::uint32_t tag;      // more of the key's bits: most probes end here
        std::uint32_t position; // in m_stored, plus one; 0 marks an empty slot
    };
    // All-zero bytes are an empty slot.
    static_assert(std::is_trivially_copyable_v<Slot> && std::is_trivially_destructible_v<Slot>);
    static constexpr std::size_t k_first_capacity = 1 << 16;
    // A reservation of the index is memory held whether the entries come or
    // not (a log of few events repeated): at most 256 MiB of it (32M
    // slots); past that, the index grows. Growing it from 2M entries to 9M
    // was a fifth of a 10M-record run. The entries' reservation is address
    // space only (a page is held once an entry is written to it), and
    // saves the vector's doublings: copying 9M entries at its last one held
    // both copies at once (892 MiB peak against 570 MiB reserved).
    static constexpr std::size_t k_most_reserved = 16'000'000;
    static constexpr std::size_t k_most_entries_reserved = 64'000'000;

    [[nodiscard]] bool too_full(std::size_t entries) const { return entries * 10 > m_capacity * 7; }

    // Bytes 8..11: the index uses the first ones.
    static std::uint32_t tag_of(const FingerprintBytes& key) {
        std::uint32_t tag = 0;
        std::memcpy(&tag, key.data() + 8, sizeof tag);
        return tag;
    }

    // Where the key's probe starts (m_capacity is a power of two, not 0).
    [[nodiscard]] std::size_t home(const FingerprintBytes& key) const {
        return FingerprintBytesHash{}(key) & (m_capacity - 1);
    }

    // The slot holding `key`, or the empty slot where it would go.
    [[nodiscard]] std::size_t probe(const FingerprintBytes& key) const {
        auto tag = tag_of(key);
        auto mask = m_capacity - 1;
        for (auto index = home(key);; index = (index + 1) & mask) {
            const auto& slot = m_slots[index];
            if (slot.position == 0 ||
                (slot.tag == tag && same_key(m_stored[slot.position - 1].key, key)))
                return index;
        }
    }

    // Two loads and compares, where == on the arrays calls memcmp.
    static bool same_key(const FingerprintBytes& a, const FingerprintBytes& b) {
        std::uint64_t a_words[2], b_words[2];
        std::memcpy(a_words, a.data(), sizeof a_words);
        std::memcpy(b_words, b.data(), sizeof b_words);
        return ((a_words[0] ^ b_words[0]) | (a_words[1] ^ b_words[1])) == 0;
    }
    static_assert(sizeof(FingerprintBytes) == 16);

    void rebuild_index(std::size_t capacity) {
        auto bytes = capacity * sizeof(Slot);
        m_slots = {static_cast<Slot*>(map_zeroed(bytes)), UnmapZeroed{bytes}};
        m_capacity = capacity;
        auto mask = m_capacity - 1;
        for (std::size_t position = 0; position < m_stored.size(); ++position) {
            const auto& key = m_stored[position].key;
            auto index = home(key);
            while (m_slots[index].position != 0)
                index = (index + 1) & mask;
            m_slots[index] = {tag_of(key), static_cast<std::uint32_t>(position + 1)};
        }
    }

    HugeVector<Stored> m_stored; // 48 MB a million: huge pages (util/huge_pages.hpp)
    // Maps m_stored's pages ahead of its appends; stopped before m_stored
    // is freed (declared after it).
    PopulatedAhead m_populated;
    std::unique_ptr<Slot[], UnmapZeroed> m_slots;
    std::size_t m_capacity = 0; // a power of two, or 0
};

// Whether `claim` of a fingerprint already seen (first copy at
// `first_seen`, remembered until `expires_at`) is a first copy again: the
// fingerprint expired, or its first copy lies outside the claim's window.
inline bool claims_anew(const FingerprintClaim& claim, Timestamp first_seen, Timestamp expires_at,
                        Timestamp now) {
    return expires_at <= now ||
           (claim.window.count() > 0 && claim.event_time - first_seen > claim.window);
}

// Applies `claim` to the table: a new fingerprint, or one claims_anew()
// says, makes this record the first copy; otherwise it is one more repeat.
// `source` is the caller's id for claim.source.
inline const Entry& decide(FingerprintTable& table, const FingerprintClaim& claim,
                           std::uint32_t source, Timestamp now) {
    auto [found, inserted] = table.find_or_insert(claim.fingerprint);
    auto& entry = *found;
    if (inserted || claims_anew(claim, entry.first_seen, entry.expires_at, now))
        entry = {claim.event_time, claim.expires_at, 1, source, claim.line};
    else
        ++entry.seen_count; // 4 billion copies of one event would wrap: not a concern
    return entry;
}

} // namespace idem::store::detail
