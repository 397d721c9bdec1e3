#include "idem/store/detail/backends.hpp"
#include "idem/store/detail/plays_roles.hpp"
#include "idem/store/redis/redis_checkpoints.hpp"
#include "idem/store/redis/redis_cluster.hpp"
#include "idem/store/redis/redis_entities.hpp"
#include "idem/store/redis/redis_fingerprint_claims.hpp"
#include "idem/store/redis/redis_held_copies.hpp"
#include "idem/store/redis/redis_nonces.hpp"
#include "idem/store/redis/redis_reorder.hpp"
#include "idem/store/redis/redis_replay.hpp"
#include "idem/store/redis/redis_session.hpp"
#include "idem/store/redis/redis_verdicts.hpp"
#include "idem/store/redis/redis_windows.hpp"
#include "idem/store/store.hpp"

#include <memory>
#include <string>
#include <vector>

namespace idem::store {

namespace {

// Redis, single node or Cluster, playing every role: each role is a class
// of its own (redis_<role>.hpp) over the one session they share. Writes
// that must land together are queued in the session and applied by
// commit() in one MULTI per slot.
class RedisStore final
    : public detail::PlaysRoles<FingerprintStore, EvidenceStore, NonceStore, CheckpointStore,
                                SequencerStore, HeldCopyStore, ReplayLedgerStore, VerdictStore,
                                WindowStore, EntityStore> {
public:
    explicit RedisStore(const StoreLocation& location) : m_session(location) {}

    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce,
                           const NonceSighting& sighting, Duration window,
                           Timestamp keep_until) override {
        return m_nonces.claim(scope, nonce, sighting, window, keep_until);
    }

    std::vector<std::optional<NonceEntry>> kept_nonces(std::span<const NonceName> names) override {
        return m_nonces.kept(names);
    }

protected:
    std::vector<NonceClaim> claim_batch(std::span<const NonceRequest> requests) override {
        return m_nonces.claim_batch(requests);
    }

public:
    // Redis expires keys itself: `now` is not needed.
    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp) override {
        return m_fingerprints.claim(scope, claims);
    }

    // Not in one transaction with the claims (Redis has none across a
    // pipeline): see docs/dedup.md on what a crash can do with Redis.
    void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                             Timestamp) override {
        m_fingerprints.release(scope, fingerprint);
    }

    void for_each_fingerprint_record(
        std::string_view scope,
        const std::function<void(const FingerprintRecord&)>& visit) override {
        m_fingerprints.for_each_record(scope, visit);
    }

    std::optional<Checkpoint> load_checkpoint(std::string_view name) override {
        return m_checkpoints.load(name);
    }
    void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) override {
        m_checkpoints.save(name, checkpoint);
    }
    void clear_checkpoint(std::string_view name) override { m_checkpoints.clear(name); }

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) override {
        return m_reorder.load_partitions(scope, partitions);
    }
    std::vector<HeldRecordRow> load_held(std::string_view scope) override {
        return m_reorder.load_held(scope);
    }
    void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) override {
        m_reorder.save(scope, changes);
    }
    void clear_reorder_state(std::string_view scope) override { m_reorder.clear(scope); }

    void save_verdicts(std::string_view scope,
                       const std::vector<VerdictRecord>& verdicts) override {
        m_verdicts.save(scope, verdicts);
    }
    void for_each_verdict(std::string_view scope,
                          const std::function<void(const VerdictRecord&)>& visit) override {
        m_verdicts.for_each(scope, visit);
    }

    std::vector<ReplayClaim> claim_replays(std::string_view scope,
                                           const std::vector<std::string>& keys,
                                           std::string_view owner, Timestamp now,
                                           Timestamp lease_until, ReplayRerun rerun) override {
        return m_replay.claim(scope, keys, owner, now, lease_until, rerun);
    }
    void renew_replay_leases(std::string_view scope, const std::vector<std::string>& keys,
                             std::string_view owner, Timestamp lease_until) override {
        m_replay.renew_leases(scope, keys, owner, lease_until);
    }
    void save_replay_entries(std::string_view scope,
                             const std::vector<ReplayEntry>& entries) override {
        m_replay.save(scope, entries);
    }
    void for_each_replay_entry(std::string_view scope,
                               const std::function<void(const ReplayEntry&)>& visit) override {
        m_replay.for_each(scope, visit);
    }

    std::vector<HeldCopyRow> load_held_copies(std::string_view name) override {
        return m_held_copies.load(name);
    }
    void save_held_copies(std::string_view name, const HeldCopyChanges& changes) override {
        m_held_copies.save(name, changes);
    }
    void clear_held_copies(std::string_view name) override { m_held_copies.clear(name); }

    std::vector<std::pair<std::string, std::string>> load_windows(std::string_view name,
                                                                  std::string& meta) override {
        return m_windows.load(name, meta);
    }
    void save_windows(std::string_view name, const WindowChanges& changes) override {
        m_windows.save(name, changes);
    }
    void clear_windows(std::string_view name) override { m_windows.clear(name); }

    std::vector<std::optional<std::string>>
    load_entities(std::string_view scope, const std::vector<std::string>& entities) override {
        return m_entities.load(scope, entities);
    }
    void save_entities(std::string_view scope,
                       const std::vector<std::pair<std::string, std::string>>& states) override {
        m_entities.save(scope, states);
    }
    void clear_entities(std::string_view scope) override { m_entities.clear(scope); }

    // The queued writes first (a checkpoint among them): confirmed claims
    // never run ahead of the checkpoint that covers them.
    void commit() override {
        m_session.apply_pending();
        m_fingerprints.confirm_batch();
    }

    std::string describe() const override { return m_session.describe(); }

private:
    detail::RedisSession m_session;
    detail::RedisFingerprintClaims m_fingerprints{m_session};
    detail::RedisNonces m_nonces{m_session};
    detail::RedisCheckpoints m_checkpoints{m_session};
    detail::RedisReorderState m_reorder{m_session};
    detail::RedisHeldCopies m_held_copies{m_session, m_reorder};
    detail::RedisVerdicts m_verdicts{m_session};
    detail::RedisReplayLedger m_replay{m_session};
    detail::RedisWindows m_windows{m_session};
    detail::RedisEntities m_entities{m_session};
};

} // namespace

void set_redis_credentials(std::string user, std::string password) {
    detail::set_redis_credentials({std::move(user), std::move(password)});
}

void set_store_timeout(Duration timeout) {
    detail::set_store_timeout(timeout);
}

namespace detail {

std::unique_ptr<Store> open_redis_store(const StoreLocation& location) {
    return std::make_unique<RedisStore>(location);
}

} // namespace detail

} // namespace idem::store
