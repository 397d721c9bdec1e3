#pragma once
// Where a store is (docs/stores.md): a SQLite file by default, ":memory:",
// or redis://host:port[,host:port...][/db], and the process-wide settings
// every Redis connection shares.

#include "idem/util/time.hpp"
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::store {

enum class StoreKind { sqlite, memory, redis };

struct StoreLocation {
    StoreKind kind = StoreKind::sqlite;
    std::string path; // sqlite
    std::string host; // redis: the first seed
    int port = 6379;
    // redis: every seed of redis://h1:7001,h2:7002 (a cluster is found from
    // any one that answers); host and port are the first.
    std::vector<std::pair<std::string, int>> seeds;
    int database = 0;
    // How long to wait for a SQLite file another process holds locked.
    Duration lock_timeout = std::chrono::seconds(60);
    // How much of a SQLite file to keep in memory: verify's nonces and
    // replay's ledger are B-trees probed at random; dedup's fingerprints
    // (k_fingerprint_store_cache_bytes) and reorder's commits touch few pages.
    std::uint64_t cache_bytes = 256ULL << 20;

    // For messages: never includes a password.
    [[nodiscard]] std::string describe() const;
};

// dedup's and listen --dedup's connection: fingerprints are appended to a
// log and found through the slots, not through SQLite's B-trees, so a
// 256 MiB cache only held log pages already written. Measured at 10M
// records (docs/dedup.md): 32 MiB is as fast, and 240 MiB less RSS.
inline constexpr std::uint64_t k_fingerprint_store_cache_bytes = 32ULL << 20;

// The page cache of a store whose commits write only what changed, a few
// pages each (reorder's held records, merge's open windows): memory is for
// what the run holds, not for caching the file.
inline constexpr std::uint64_t k_commit_only_store_cache_bytes = 4ULL << 20;

// The page cache of a store read and written an entity or a key at a time
// (states' entities, reconcile's pending and settled keys), each once per
// run or per commit.
inline constexpr std::uint64_t k_entity_store_cache_bytes = 16ULL << 20;

// Throws UsageError for a URI that names no store.
// `uri` fit for a message, a summary or a metrics label: a user-info
// part's password ("redis://default:***@host:6379") and the value of a
// password-like query parameter (password, pass, pwd, secret, token,
// auth) replaced by ***. Every message that echoes a store URI uses it.
[[nodiscard]] std::string redact_store_uri(std::string_view uri);

[[nodiscard]] StoreLocation parse_store_uri(std::string_view uri);

// The password (and ACL user, may be empty) for every Redis connection this
// process opens. The CLI sets it from IDEM_REDIS_PASSWORD and
// IDEM_REDIS_USER; it never appears in a URI or a message.
void set_redis_credentials(std::string user, std::string password);

// How long a Redis store may stay unreachable (a restart, a failover)
// before an operation fails with StoreError: connections are retried with
// backoff, and commands lost with one are sent again when that is safe.
// Default 10 s; the CLI sets it from --store-timeout.
void set_store_timeout(Duration timeout);

} // namespace idem::store
