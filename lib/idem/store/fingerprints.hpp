#pragma once
// The fingerprint role (dedup, listen --dedup): which events were seen, by
// a fingerprint of their key; and the evidence role: every copy, read back
// by audit --store.

#include "idem/record/key.hpp"
#include "idem/util/time.hpp"
#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

// A dedup fingerprint (record/key.hpp).
using record::FingerprintBytes;
using record::FingerprintBytesHash;

// One record's claim on a fingerprint (dedup).
struct FingerprintClaim {
    FingerprintBytes fingerprint{};
    Timestamp event_time;    // the record's time (--time-field)
    Duration window{0};      // a repeat further than this from the first copy is new; 0: no window
    Timestamp expires_at;    // how long the store remembers it (--ttl)
    std::string_view source; // where the record came from, for evidence
    std::uint64_t line = 0;
};

struct FingerprintResult {
    bool first = true;            // this record claimed the fingerprint
    std::uint64_t seen_count = 1; // copies seen so far, this one included
    Timestamp first_seen;         // event time of the first copy
    std::string first_source;     // where the first copy was (duplicates only:
    std::uint64_t first_line = 0; // a first copy is where its claim says)
};

// Repeats of one event a store keeps as evidence, besides the latest; past
// them the store still counts every copy (docs/dedup.md).
inline constexpr std::uint64_t k_kept_repeats = 16;

// One copy of an event as dedup recorded it: the first, or a repeat kept as
// evidence of it (`audit --store` reads them).
struct FingerprintRecord {
    FingerprintBytes fingerprint{};
    bool first = true;
    Timestamp event_time;
    std::string source;
    std::uint64_t line = 0;
    // Copies of the event counted before this one but not kept as evidence
    // (a store keeps a bounded number of repeats per event, and the latest).
    std::uint64_t copies_not_kept = 0;
};

class FingerprintStore {
public:
    virtual ~FingerprintStore() = default;

    // Claims each fingerprint within `scope`, in one transaction that stays
    // open until commit(): other processes sharing the store wait, so each
    // fingerprint is first for exactly one of them. A fingerprint whose
    // entry expired (now past expires_at), or whose first copy lies further
    // than the claim's window from this one, is claimed anew. Duplicates are
    // kept as evidence, linked to the first copy. Results are in claim order.
    virtual std::vector<FingerprintResult>
    claim_fingerprints(std::string_view scope, const std::vector<FingerprintClaim>& claims,
                       Timestamp now) = 0;

    // A hint that about `records` claims are coming within `scope` (dedup
    // reads it off the input's size): tables in memory are sized once
    // instead of growing. Stores without such tables ignore it.
    virtual void expect_fingerprints(std::string_view scope, std::uint64_t records) {
        (void)scope;
        (void)records;
    }
    // Gives up a first copy's claim, made earlier in this process, so that
    // the next copy is first again: for a delivery that was claimed but
    // could not be passed on (`listen --dedup --forward-to`). The entry
    // expires at `now`; its evidence stays. Within the transaction commit() ends.
    virtual void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                                     Timestamp now) = 0;
};

// Reading back what dedup recorded: only a store that outlives its runs.
class EvidenceStore {
public:
    virtual ~EvidenceStore() = default;

    // Every copy dedup recorded within `scope`, first copies before their
    // repeats. Throws StoreError.
    virtual void
    for_each_fingerprint_record(std::string_view scope,
                                const std::function<void(const FingerprintRecord&)>& visit) = 0;
};

} // namespace idem::store
