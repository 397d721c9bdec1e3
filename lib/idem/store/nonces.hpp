#pragma once
// The nonce role (verify --nonce, listen): which message ids were already
// delivered, judged by one rule in every store.

#include "idem/util/time.hpp"
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

// One sighting of a message id by `verify --nonce`: when the delivery was
// received (event time: --now, else its received_at) and which record it is.
struct NonceSighting {
    Timestamp received_at;
    std::string_view source;
    std::uint64_t line = 0;
};

// What a store keeps of a message id: its earliest sighting so far.
struct NonceEntry {
    Timestamp first_seen;
    std::string source;
    std::uint64_t line = 0;
};

enum class NonceVerdict {
    fresh,       // not seen within the window before it
    replay,      // seen at an earlier (or the same) received_at within the window
    same_record, // this very record, checked by an earlier run
};

struct NonceClaim {
    NonceVerdict verdict = NonceVerdict::fresh;
    std::optional<Timestamp> first_seen; // the earlier sighting, unless fresh
};

// The one rule every store applies (docs/stores.md), judged on event time
// so that no store's clock or TTL changes a verdict: a record is never a
// replay of itself; a sighting within `window` after the kept one is a
// replay; one before it becomes the kept one (it came first); one beyond
// the window either way is fresh. `store` says whether the sighting is to
// be kept as the entry.
struct NonceDecision {
    NonceClaim claim;
    bool store = false;
};
[[nodiscard]] NonceDecision judge_nonce(const std::optional<NonceEntry>& kept,
                                        const NonceSighting& sighting, Duration window);

// One claim of a batch: claim_nonce()'s arguments.
struct NonceRequest {
    std::string_view scope;
    std::string_view nonce;
    NonceSighting sighting;
    Duration window{};
    Timestamp keep_until{};
    // What an earlier release keyed the same delivery on (its message id
    // or its signature's text), when that differs from `nonce`: looked up,
    // never kept, so that a store an earlier release wrote still knows the
    // deliveries it saw (docs/stores.md, "Nonces an earlier release kept").
    std::string_view earlier_form;
};

// Where a kept nonce is looked up.
struct NonceName {
    std::string_view scope;
    std::string_view nonce;
};

class NonceStore {
public:
    virtual ~NonceStore() = default;

    // Judges a sighting of `nonce` within `scope` by judge_nonce() against
    // what the store kept, keeps it when the rule says so, and forgets the
    // entry once the wall clock passes `keep_until`. Throws StoreError.
    virtual NonceClaim claim_nonce(std::string_view scope, std::string_view nonce,
                                   const NonceSighting& sighting, Duration window,
                                   Timestamp keep_until) = 0;

    // The requests judged in order, each as claim_nonce() would judge it
    // after the ones before it (a nonce twice in a batch: the second meets
    // the first); then a fresh claim whose earlier form the store kept is
    // judged against that entry by the same rule, which is never replaced.
    [[nodiscard]] std::vector<NonceClaim> claim_nonces(std::span<const NonceRequest> requests);

    // What the store keeps for each name, read only. Throws StoreError.
    virtual std::vector<std::optional<NonceEntry>>
    kept_nonces(std::span<const NonceName> names) = 0;

protected:
    // claim_nonces() without the earlier forms. A store across a network
    // answers a batch in one round trip, or two when a kept entry is to be
    // replaced.
    virtual std::vector<NonceClaim> claim_batch(std::span<const NonceRequest> requests);
};

} // namespace idem::store
