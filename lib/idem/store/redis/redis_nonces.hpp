#pragma once
// Internal to the Redis store: verify's and listen's nonces, one hash per
// nonce ("idem:nonce:SCOPE:NONCE") expiring when the nonce may be
// forgotten. Single-key operations, so any name is Redis Cluster-safe; the
// prefix keeps idem's keys apart from an application's.

#include "idem/store/nonces.hpp"
#include "idem/store/redis/redis_session.hpp"

#include <string>
#include <string_view>

namespace idem::store::detail {

class RedisNonces {
public:
    explicit RedisNonces(RedisSession& session) : m_session(session) {}

    // The rule of judge_nonce() (nonces.hpp), in Lua so that the look and
    // the keep are one step for every process sharing the store; the tests
    // run one scenario through every store and compare the verdicts.
    NonceClaim claim(std::string_view scope, std::string_view nonce, const NonceSighting& sighting,
                     Duration window, Timestamp keep_until);

private:
    RedisSession& m_session;
    std::string m_script; // SHA1 of the loaded script
};

} // namespace idem::store::detail
