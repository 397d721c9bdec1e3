// ":memory:": the store as hash maps, for one run that needs no persistence.
// The fastest store, and the baseline the others are measured against.

#include "idem/store/checkpoints.hpp"
#include "idem/store/detail/backends.hpp"
#include "idem/store/detail/fingerprint_table.hpp"
#include "idem/store/detail/plays_roles.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/held_copies.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/verdicts.hpp"

#include <algorithm>
#include <cstring>
#include <map>
#include <unordered_map>
#include <vector>

namespace idem::store {

namespace {

// Every role but evidence: nothing outlives the run that made it, so there
// is none to read back.
class MemoryStore final
    : public detail::PlaysRoles<FingerprintStore, NonceStore, CheckpointStore, SequencerStore,
                                HeldCopyStore, ReplayLedgerStore, VerdictStore, WindowStore,
                                EntityStore> {
public:
    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce,
                           const NonceSighting& sighting, Duration window,
                           Timestamp keep_until) override {
        auto key = nonce_key(scope, nonce);
        auto decision = judge_nonce(kept_nonce(key), sighting, window);
        if (decision.store)
            m_nonces.insert_or_assign(
                key, NonceEntry{sighting.received_at, std::string(sighting.source), sighting.line});
        (void)keep_until; // nothing outlives the run
        return decision.claim;
    }

    std::vector<std::optional<NonceEntry>> kept_nonces(std::span<const NonceName> names) override {
        std::vector<std::optional<NonceEntry>> kept;
        kept.reserve(names.size());
        for (const auto& name : names)
            kept.push_back(kept_nonce(nonce_key(name.scope, name.nonce)));
        return kept;
    }

    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp now) override {
        auto& table = m_fingerprints[std::string(scope)];
        std::vector<FingerprintResult> results(claims.size());
        for (std::size_t i = 0; i < claims.size(); ++i) {
            if (i + detail::k_claims_prefetched_ahead < claims.size())
                table.prefetch(claims[i + detail::k_claims_prefetched_ahead].fingerprint);
            const auto& claim = claims[i];
            const auto& entry = detail::decide(table, claim, intern(claim.source), now);
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

    void expect_fingerprints(std::string_view scope, std::uint64_t records) override {
        m_fingerprints[std::string(scope)].reserve(records);
    }

    void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                             Timestamp now) override {
        auto found = m_fingerprints.find(std::string(scope));
        if (found == m_fingerprints.end()) return;
        if (auto* entry = found->second.find_mutable(fingerprint))
            entry->expires_at = std::min(entry->expires_at, now);
    }

    std::uint64_t collect_garbage(Timestamp now) override {
        std::uint64_t removed = 0;
        for (auto& [scope, table] : m_fingerprints)
            removed += table.remove_expired(now);
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

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) override {
        std::vector<std::optional<PartitionProgress>> found(partitions.size());
        auto state = m_reorder.find(std::string(scope));
        if (state == m_reorder.end()) return found;
        for (std::size_t i = 0; i < partitions.size(); ++i) {
            auto progress = state->second.progress.find(partitions[i]);
            if (progress != state->second.progress.end()) found[i] = progress->second;
        }
        return found;
    }

    std::vector<HeldRecordRow> load_held(std::string_view scope) override {
        std::vector<HeldRecordRow> rows;
        auto state = m_reorder.find(std::string(scope));
        if (state != m_reorder.end())
            for (const auto& [id, row] : state->second.held)
                rows.push_back(row);
        return rows;
    }

    void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) override {
        if (changes.empty()) return;
        auto& state = m_reorder[std::string(scope)];
        for (const auto& progress : changes.progress)
            state.progress[progress.partition] = progress;
        for (const auto& row : changes.held)
            state.held[row.id] = row;
        for (auto id : changes.released)
            state.held.erase(id);
    }

    void clear_reorder_state(std::string_view scope) override {
        m_reorder.erase(std::string(scope));
    }

    std::vector<ReplayClaim> claim_replays(std::string_view scope,
                                           const std::vector<std::string>& keys,
                                           std::string_view owner, Timestamp now,
                                           Timestamp lease_until, ReplayRerun rerun) override {
        auto& ledger = m_replays[std::string(scope)];
        std::vector<ReplayClaim> claims;
        claims.reserve(keys.size());
        for (const auto& key : keys) {
            auto& claim = claims.emplace_back();
            auto found = ledger.find(key);
            if (found != ledger.end()) claim.previous = found->second;
            claim.granted = may_claim_replay(claim.previous, now, rerun);
            if (!claim.granted) continue;
            auto& entry = ledger[key];
            entry.key = key;
            entry.state = ReplayState::in_progress;
            entry.owner = owner;
            entry.lease_until = lease_until;
            entry.updated_at = now;
        }
        return claims;
    }

    void renew_replay_leases(std::string_view scope, const std::vector<std::string>& keys,
                             std::string_view owner, Timestamp lease_until) override {
        auto& ledger = m_replays[std::string(scope)];
        for (const auto& key : keys) {
            auto found = ledger.find(key);
            if (found != ledger.end() && found->second.state == ReplayState::in_progress &&
                found->second.owner == owner)
                found->second.lease_until = lease_until;
        }
    }

    void save_replay_entries(std::string_view scope,
                             const std::vector<ReplayEntry>& entries) override {
        auto& ledger = m_replays[std::string(scope)];
        for (const auto& entry : entries)
            ledger[entry.key] = entry;
    }

    void for_each_replay_entry(std::string_view scope,
                               const std::function<void(const ReplayEntry&)>& visit) override {
        auto found = m_replays.find(std::string(scope));
        if (found == m_replays.end()) return;
        for (const auto& [key, entry] : found->second)
            visit(entry);
    }

    void save_verdicts(std::string_view scope,
                       const std::vector<VerdictRecord>& verdicts) override {
        auto& kept = m_verdicts[std::string(scope)];
        for (const auto& verdict : verdicts)
            kept.insert_or_assign({verdict.source, verdict.line}, verdict);
    }

    void for_each_verdict(std::string_view scope,
                          const std::function<void(const VerdictRecord&)>& visit) override {
        auto found = m_verdicts.find(std::string(scope));
        if (found == m_verdicts.end()) return;
        for (const auto& [where, verdict] : found->second)
            visit(verdict);
    }

    std::vector<HeldCopyRow> load_held_copies(std::string_view name) override {
        std::vector<HeldCopyRow> rows;
        auto found = m_held_copies.find(std::string(name));
        if (found != m_held_copies.end())
            for (const auto& [id, row] : found->second)
                rows.push_back(row);
        return rows;
    }

    void save_held_copies(std::string_view name, const HeldCopyChanges& changes) override {
        if (changes.empty()) return;
        auto& held = m_held_copies[std::string(name)];
        for (const auto& row : changes.held)
            held[row.id] = row;
        for (auto id : changes.released)
            held.erase(id);
    }

    void clear_held_copies(std::string_view name) override {
        m_held_copies.erase(std::string(name));
    }

    std::vector<std::pair<std::string, std::string>> load_windows(std::string_view name,
                                                                  std::string& meta) override {
        std::vector<std::pair<std::string, std::string>> windows;
        meta.clear();
        auto found = m_windows.find(std::string(name));
        if (found == m_windows.end()) return windows;
        meta = found->second.meta;
        for (const auto& window : found->second.windows)
            windows.push_back(window);
        return windows;
    }

    void save_windows(std::string_view name, const WindowChanges& changes) override {
        auto& kept = m_windows[std::string(name)];
        for (const auto& [key, state] : changes.saved)
            kept.windows[key] = state;
        for (const auto& key : changes.removed)
            kept.windows.erase(key);
        kept.meta = changes.meta;
    }

    void clear_windows(std::string_view name) override { m_windows.erase(std::string(name)); }

    std::vector<std::optional<std::string>>
    load_entities(std::string_view scope, const std::vector<std::string>& entities) override {
        std::vector<std::optional<std::string>> found(entities.size());
        auto kept = m_entities.find(std::string(scope));
        if (kept == m_entities.end()) return found;
        for (std::size_t i = 0; i < entities.size(); ++i)
            if (auto state = kept->second.find(entities[i]); state != kept->second.end())
                found[i] = state->second;
        return found;
    }

    void save_entities(std::string_view scope,
                       const std::vector<std::pair<std::string, std::string>>& states) override {
        auto& kept = m_entities[std::string(scope)];
        for (const auto& [entity, state] : states)
            kept[entity] = state;
    }

    void clear_entities(std::string_view scope) override { m_entities.erase(std::string(scope)); }

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

    struct ReorderState {
        std::unordered_map<std::string, PartitionProgress> progress;
        std::map<std::uint64_t, HeldRecordRow> held;
    };

    static std::string nonce_key(std::string_view scope, std::string_view nonce) {
        return std::string(scope) + '\0' + std::string(nonce);
    }
    [[nodiscard]] std::optional<NonceEntry> kept_nonce(const std::string& key) const {
        auto found = m_nonces.find(key);
        if (found == m_nonces.end()) return std::nullopt;
        return found->second;
    }

    std::map<std::string, NonceEntry> m_nonces;
    std::map<std::string, ReorderState> m_reorder;
    std::map<std::string, std::map<std::pair<std::string, std::uint64_t>, VerdictRecord>>
        m_verdicts;
    std::map<std::string, Checkpoint> m_checkpoints;
    struct OpenWindows {
        std::map<std::string, std::string> windows;
        std::string meta;
    };
    std::map<std::string, OpenWindows> m_windows;
    std::map<std::string, std::unordered_map<std::string, std::string>> m_entities;
    std::map<std::string, std::map<std::uint64_t, HeldCopyRow>> m_held_copies;
    std::map<std::string, std::map<std::string, ReplayEntry>> m_replays;
    std::map<std::string, detail::FingerprintTable> m_fingerprints;
    std::unordered_map<std::string, std::uint32_t> m_source_ids;
    std::vector<std::string> m_source_names;
    std::uint32_t m_last_source = 0;
};

} // namespace

namespace detail {

std::unique_ptr<Store> open_memory_store() {
    return std::make_unique<MemoryStore>();
}

} // namespace detail

} // namespace idem::store
