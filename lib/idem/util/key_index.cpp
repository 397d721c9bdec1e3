#include "idem/util/key_index.hpp"

#include <algorithm>
#include <xxhash.h>

namespace idem {

std::uint64_t KeyIndex::hash_of(std::string_view key) {
    return XXH3_64bits(key.data(), key.size());
}

void KeyIndex::reserve(std::size_t keys) {
    std::size_t slots = 16;
    while (slots < keys * 2)
        slots <<= 1;
    if (slots > m_slots.size()) {
        auto old = std::move(m_slots);
        m_slots.assign(slots, Slot{});
        for (const auto& slot : old)
            if (slot.index_plus_one != 0) {
                auto at = slot.hash & (m_slots.size() - 1);
                while (m_slots[at].index_plus_one != 0)
                    at = (at + 1) & (m_slots.size() - 1);
                m_slots[at] = slot;
            }
    }
    m_names.reserve(keys);
}

void KeyIndex::grow() {
    reserve(std::max<std::size_t>(m_names.size() * 2, 8));
}

std::pair<std::uint32_t, bool> KeyIndex::find_or_add(std::string_view key, std::uint64_t hash) {
    if ((m_names.size() + 1) * 2 > m_slots.size()) grow();
    auto mask = m_slots.size() - 1;
    for (auto at = hash & mask;; at = (at + 1) & mask) {
        auto& slot = m_slots[at];
        if (slot.index_plus_one == 0) {
            auto index = static_cast<std::uint32_t>(m_names.size());
            slot = {hash, m_arena.size(), static_cast<std::uint32_t>(key.size()), index + 1};
            m_names.emplace_back(m_arena.size(), static_cast<std::uint32_t>(key.size()));
            m_arena.insert(m_arena.end(), key.begin(), key.end());
            return {index, true};
        }
        if (holds(slot, hash, key)) return {slot.index_plus_one - 1, false};
    }
}

std::optional<std::uint32_t> KeyIndex::find(std::string_view key, std::uint64_t hash) const {
    if (m_slots.empty()) return std::nullopt;
    auto mask = m_slots.size() - 1;
    for (auto at = hash & mask;; at = (at + 1) & mask) {
        const auto& slot = m_slots[at];
        if (slot.index_plus_one == 0) return std::nullopt;
        if (holds(slot, hash, key)) return slot.index_plus_one - 1;
    }
}

} // namespace idem
