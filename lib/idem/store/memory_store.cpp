// ":memory:": the store as hash maps, for one run that needs no persistence.
// The fastest store, and the baseline the others are measured against.

#include "idem/store/store.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

namespace idem::store {

std::unique_ptr<Store> open_memory_store();

namespace {

struct BytesHash {
    std::size_t operator()(const FingerprintBytes& bytes) const noexcept {
        std::size_t value = 0;
        std::memcpy(&value, bytes.data(), sizeof value); // already a cryptographic hash
        return value;
    }
};

// 32 bytes: with its key, a table slot is 48, so a million fingerprints
// fit in about 100 MB.
struct Entry {
    Timestamp first_seen;
    Timestamp expires_at;
    std::uint32_t seen_count = 0;   // 0 marks an empty slot
    std::uint32_t first_source = 0; // index into the store's source names
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
        for (auto index = BytesHash{}(key)&mask;; index = (index + 1) & mask) {
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

class MemoryStore final : public Store {
public:
    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce, Timestamp now,
                           Timestamp expires_at) override {
        auto [slot, inserted] =
            m_nonces.try_emplace(std::string(scope) + '\0' + std::string(nonce));
        NonceClaim claim;
        if (!inserted && slot->second.second > now) {
            claim.fresh = false;
            claim.first_seen = slot->second.first;
            return claim;
        }
        slot->second = {now, expires_at};
        return claim;
    }

    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp now) override {
        auto& table = m_fingerprints[std::string(scope)];
        std::vector<FingerprintResult> results(claims.size());
        for (std::size_t i = 0; i < claims.size(); ++i) {
            const auto& claim = claims[i];
            auto [found, inserted] = table.find_or_insert(claim.fingerprint);
            auto& entry = *found;
            bool outside_window =
                claim.window.count() > 0 && claim.event_time - entry.first_seen > claim.window;
            if (inserted || entry.expires_at <= now || outside_window) {
                entry = {claim.event_time, claim.expires_at, 1, intern(claim.source), claim.line};
            } else {
                ++entry.seen_count; // 4 billion copies of one event would wrap: not a concern
            }
            auto& result = results[i];
            result.first = entry.seen_count == 1;
            result.seen_count = entry.seen_count;
            result.first_seen = entry.first_seen;
            if (!result.first) {
                result.first_source = m_source_names[entry.first_source];
                result.first_line = entry.first_line;
            }
        }
        return results;
    }

    std::uint64_t collect_garbage(Timestamp now) override {
        std::uint64_t removed = 0;
        for (auto& [scope, table] : m_fingerprints)
            removed += table.remove_expired(now);
        removed +=
            std::erase_if(m_nonces, [&](const auto& item) { return item.second.second <= now; });
        return removed;
    }

    std::optional<Checkpoint> load_checkpoint(std::string_view name) override {
        auto found = m_checkpoints.find(std::string(name));
        if (found == m_checkpoints.end()) return std::nullopt;
        return found->second;
    }
    void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) override {
        m_checkpoints[std::string(name)] = checkpoint;
    }
    void clear_checkpoint(std::string_view name) override {
        m_checkpoints.erase(std::string(name));
    }

    void commit() override {}
    std::string describe() const override { return ":memory:"; }

private:
    // Records come file by file, so the last source is nearly always the one.
    std::uint32_t intern(std::string_view source) {
        if (!m_source_names.empty() && m_source_names[m_last_source] == source)
            return m_last_source;
        auto [found, inserted] = m_source_ids.try_emplace(
            std::string(source), static_cast<std::uint32_t>(m_source_names.size()));
        if (inserted) m_source_names.emplace_back(source);
        m_last_source = found->second;
        return m_last_source;
    }

    std::map<std::string, std::pair<Timestamp, Timestamp>> m_nonces;
    std::map<std::string, Checkpoint> m_checkpoints;
    std::map<std::string, FingerprintTable> m_fingerprints;
    std::unordered_map<std::string, std::uint32_t> m_source_ids;
    std::vector<std::string> m_source_names;
    std::uint32_t m_last_source = 0;
};

} // namespace

std::unique_ptr<Store> open_memory_store() {
    return std::make_unique<MemoryStore>();
}

} // namespace idem::store
