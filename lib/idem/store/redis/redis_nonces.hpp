#pragma once
// Internal to the Redis store: verify's and listen's nonces, one string
// per nonce ("idem:nonce:SCOPE:NONCE" holding "FIRST_US LINE SOURCE")
// expiring when the nonce may be forgotten. Single-key operations, so any name is Redis
// Cluster-safe; the prefix keeps idem's keys apart from an application's.

#include "idem/store/nonces.hpp"
#include "idem/store/redis/redis_session.hpp"

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store::detail {

class RedisNonces {
public:
    explicit RedisNonces(RedisSession& session) : m_session(session) {}

    // The rule of judge_nonce() (nonces.hpp): a new nonce is kept by one
    // SET NX (the look and the keep one step for every process sharing the
    // store), a kept one replaced by a script that judges it again; the
    // tests run one scenario through every store and compare the verdicts.
    NonceClaim claim(std::string_view scope, std::string_view nonce, const NonceSighting& sighting,
                     Duration window, Timestamp keep_until);
    std::vector<NonceClaim> claim_batch(std::span<const NonceRequest> requests);
    // Each name's entry, read in one pipeline of GETs; a key of another
    // layout (an older idem's hash) is none.
    std::vector<std::optional<NonceEntry>> kept(std::span<const NonceName> names);

private:
    // The script over requests[contested...], one pipeline; the verdicts
    // into claims.
    void run_scripts(std::span<const NonceRequest> requests, const std::vector<std::string>& keys,
                     const std::vector<std::size_t>& contested, std::vector<NonceClaim>& claims);

    RedisSession& m_session;
    std::string m_script; // SHA1 of the loaded script
};

} // namespace idem::store::detail
