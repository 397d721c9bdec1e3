// ":memory:": the store as hash maps, for one run that needs no persistence.
// The fastest store, and the baseline the others are measured against.

#include "idem/store/store.hpp"

#include <cstring>
#include <map>
#include <unordered_map>
#include <unordered_set>

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

struct Entry {
    Timestamp first_seen;
    Timestamp expires_at;
    std::uint64_t seen_count = 0;
    const std::string* first_source = nullptr;
    std::uint64_t first_line = 0;
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
        if (table.empty()) table.reserve(1 << 16);
        std::vector<FingerprintResult> results(claims.size());
        for (std::size_t i = 0; i < claims.size(); ++i) {
            const auto& claim = claims[i];
            auto [slot, inserted] = table.try_emplace(claim.fingerprint);
            auto& entry = slot->second;
            bool outside_window =
                claim.window.count() > 0 && claim.event_time - entry.first_seen > claim.window;
            if (inserted || entry.expires_at <= now || outside_window) {
                entry = {claim.event_time, claim.expires_at, 1, intern(claim.source), claim.line};
            } else {
                ++entry.seen_count;
            }
            auto& result = results[i];
            result.first = entry.seen_count == 1;
            result.seen_count = entry.seen_count;
            result.first_seen = entry.first_seen;
            if (!result.first) {
                result.first_source = *entry.first_source;
                result.first_line = entry.first_line;
            }
        }
        return results;
    }

    std::uint64_t collect_garbage(Timestamp now) override {
        std::uint64_t removed = 0;
        for (auto& [scope, table] : m_fingerprints)
            removed += std::erase_if(
                table, [&](const auto& item) { return item.second.expires_at <= now; });
        removed +=
            std::erase_if(m_nonces, [&](const auto& item) { return item.second.second <= now; });
        return removed;
    }

    void commit() override {}
    std::string describe() const override { return ":memory:"; }

private:
    // Records come file by file, so the last source is nearly always the one.
    const std::string* intern(std::string_view source) {
        if (m_last_source && *m_last_source == source) return m_last_source;
        m_last_source = &*m_sources.emplace(source).first;
        return m_last_source;
    }

    std::map<std::string, std::pair<Timestamp, Timestamp>> m_nonces;
    std::map<std::string, std::unordered_map<FingerprintBytes, Entry, BytesHash>> m_fingerprints;
    std::unordered_set<std::string> m_sources;
    const std::string* m_last_source = nullptr;
};

} // namespace

std::unique_ptr<Store> open_memory_store() {
    return std::make_unique<MemoryStore>();
}

} // namespace idem::store
