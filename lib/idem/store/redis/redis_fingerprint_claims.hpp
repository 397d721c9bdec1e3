#pragma once
// Internal to the Redis store: dedup's fingerprint claims, with the owners'
// batches and heartbeats that settle a claim another process left
// unconfirmed, and each first copy's evidence list (the key layout is in
// redis_fingerprints.hpp).

#include "idem/store/fingerprints.hpp"
#include "idem/store/redis/redis_fingerprints.hpp"
#include "idem/store/redis/redis_liveness.hpp"
#include "idem/store/redis/redis_session.hpp"
#include "idem/util/owner.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace idem::store::detail {

class RedisFingerprintClaims {
public:
    explicit RedisFingerprintClaims(RedisSession& session) : m_session(session) {}

    std::vector<FingerprintResult> claim(std::string_view scope,
                                         const std::vector<FingerprintClaim>& claims);
    void release(std::string_view scope, const FingerprintBytes& fingerprint);
    void for_each_record(std::string_view scope,
                         const std::function<void(const FingerprintRecord&)>& visit);

    // Once a batch's output is flushed and the store's queued writes are
    // applied: confirms every first copy this batch claimed.
    void confirm_batch();

private:
    std::vector<std::size_t>
    settle_first_copies_met(const std::vector<FingerprintClaim>& claims,
                            const std::vector<std::string>& keys,
                            const std::vector<std::string>& values,
                            std::vector<std::pair<std::size_t, std::string>> met,
                            std::vector<FingerprintResult>& results);
    void bound_evidence(const std::vector<std::string>& keys, const std::vector<FirstCopy>& firsts,
                        const std::vector<std::pair<std::size_t, std::size_t>>& overflowing,
                        std::vector<FingerprintResult>& results);
    void resolve_owners(const std::vector<FirstCopy>& firsts, std::vector<MetFirstCopy>& verdicts,
                        std::vector<std::string>& owners);
    void read_confirmed_batches(const std::vector<std::string>& owners);
    void claimed(const FingerprintClaim& claim, FingerprintResult& result);
    void convert_earlier_layout(const std::vector<std::string>& keys,
                                const std::vector<std::size_t>& indexes);
    bool read_first_copy(const std::string& key, const redisReply* reply, FingerprintRecord& record,
                         std::string& evidence, std::string& not_kept);
    bool wait_for_verdict(const std::string& owner);
    [[nodiscard]] StoreError unexpected_reply(std::string_view to, const redisReply* reply) const;

    RedisSession& m_session;
    std::string m_take_script; // SHA1 of the loaded script
    std::string m_bound_script;
    std::string m_convert_script;
    std::string m_owner = new_owner_id(); // of this process's claims
    std::uint64_t m_batch = 1;            // this process's batch, confirmed by confirm_batch()
    bool m_batch_claimed = false;         // it claimed a first copy
    long long m_confirmed_until_ms = 0;   // the latest expiry of those claimed
    // The last batch each owner met had confirmed, as far as this process read.
    std::unordered_map<std::string, std::uint64_t> m_confirmed_batches;
    std::unique_ptr<Heartbeat> m_heartbeat; // from the first claim on
    OwnerLiveness m_liveness;               // of the owners met
};

} // namespace idem::store::detail
