#pragma once
// The store that subcommands share (DESIGN.md, "The store"): a SQLite file by
// default, ":memory:", or redis://host:port[/db]. It speaks intent; no SQL or
// Redis command appears outside this module.

#include "idem/util/time.hpp"

#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace idem::store {

enum class StoreKind { sqlite, memory, redis };

struct StoreLocation {
    StoreKind kind = StoreKind::sqlite;
    std::string path; // sqlite
    std::string host; // redis
    int port = 6379;
    int database = 0;

    // For messages: never includes a password.
    [[nodiscard]] std::string describe() const;
};

// Throws UsageError for a URI that names no store.
[[nodiscard]] StoreLocation parse_store_uri(std::string_view uri);

struct NonceClaim {
    bool fresh = true;                   // false: seen before and not yet expired
    std::optional<Timestamp> first_seen; // when fresh is false
};

class Store {
  public:
    virtual ~Store() = default;

    // Remembers `nonce` within `scope` until `expires_at`. A nonce already
    // held by an unexpired claim is not fresh. Throws StoreError.
    virtual NonceClaim claim_nonce(std::string_view scope, std::string_view nonce, Timestamp now,
                                   Timestamp expires_at) = 0;

    // Makes every claim so far durable. Throws StoreError.
    virtual void commit() = 0;

    [[nodiscard]] virtual std::string describe() const = 0;
};

// Opens (and creates or migrates) the store. Throws StoreError naming it.
[[nodiscard]] std::unique_ptr<Store> open_store(const StoreLocation& location);

} // namespace idem::store
