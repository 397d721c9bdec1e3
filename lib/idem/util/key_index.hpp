#pragma once
// Text keys to dense indexes (0, 1, 2, ...): open addressing over 64-bit
// hashes, the names in one arena. Callers keep what they know of each key
// in plain vectors by index. A lookup costs one cache line of the table
// and one of the arena, where a node-based map chased a bucket, a node and
// a far-away hash code, and divided by a prime twice (reconcile and states
// spent half their time there).

#include "idem/util/huge_pages.hpp"
#include "idem/util/prefetch.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace idem {

class KeyIndex {
public:
    // The hash every lookup uses; callers may compute it ahead (in a
    // worker thread) and pass it in.
    [[nodiscard]] static std::uint64_t hash_of(std::string_view key);

    // The key's index, and whether it is new.
    std::pair<std::uint32_t, bool> find_or_add(std::string_view key) {
        return find_or_add(key, hash_of(key));
    }
    std::pair<std::uint32_t, bool> find_or_add(std::string_view key, std::uint64_t hash);
    // The key's index, or none.
    [[nodiscard]] std::optional<std::uint32_t> find(std::string_view key) const {
        return find(key, hash_of(key));
    }
    [[nodiscard]] std::optional<std::uint32_t> find(std::string_view key, std::uint64_t hash) const;
    // Asks the CPU for the table slot of a key looked up soon.
    void prefetch(std::uint64_t hash) const {
        if (!m_slots.empty()) idem::prefetch(&m_slots[hash & (m_slots.size() - 1)]);
    }
    // A second step, once that slot is in the cache: the index of the key
    // with this hash if it sits in its home slot (most do), its name asked
    // for too. The caller then asks for what it keeps by index. A guess:
    // a hash is not the key, so find_or_add() still decides.
    [[nodiscard]] std::optional<std::uint32_t> peek(std::uint64_t hash) const {
        if (m_slots.empty()) return std::nullopt;
        const auto& slot = m_slots[hash & (m_slots.size() - 1)];
        if (slot.index_plus_one == 0 || slot.hash != hash) return std::nullopt;
        idem::prefetch(m_arena.data() + slot.offset);
        return slot.index_plus_one - 1;
    }

    [[nodiscard]] std::string_view name(std::uint32_t index) const {
        const auto& [offset, size] = m_names[index];
        return {m_arena.data() + offset, size};
    }
    [[nodiscard]] std::size_t size() const { return m_names.size(); }
    // A hint: about this many keys are coming (the table sized once).
    void reserve(std::size_t keys);

private:
    // The name's place is in the slot itself, so that comparing it costs
    // one read of the arena and not one of m_names first.
    struct Slot {
        std::uint64_t hash = 0;
        std::uint64_t offset = 0;         // of the name in m_arena
        std::uint32_t size = 0;           // of the name
        std::uint32_t index_plus_one = 0; // 0: empty
    };
    [[nodiscard]] bool holds(const Slot& slot, std::uint64_t hash, std::string_view key) const {
        return slot.hash == hash && slot.size == key.size() &&
               std::string_view(m_arena.data() + slot.offset, slot.size) == key;
    }
    void grow();

    // Millions of keys grow these by doubling: huge pages (huge_pages.hpp).
    HugeVector<Slot> m_slots;
    HugeVector<char> m_arena;
    HugeVector<std::pair<std::size_t, std::uint32_t>> m_names;
};

} // namespace idem
