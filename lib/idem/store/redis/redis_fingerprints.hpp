#pragma once
// Internal to the Redis store: how dedup's fingerprints are kept
// (docs/stores.md, "Key layout"), and what a claim does about a first copy
// it meets. Pure, so the rules are unit-tested without a server.
//
// A first copy is one string key, "idem:fp:{scope:hex}", claimed with one
// `SET NX PXAT GET`: a new fingerprint costs Redis one plain command, not a
// script. Its value names the process that claimed it and that process's
// batch; the process confirms a whole batch with one write once the batch's
// output is flushed ("idem:confirmed:OWNER" holds the last batch it
// confirmed). A first copy whose batch is past its owner's confirmed one was
// claimed but maybe never emitted: whoever meets it asks whether the owner
// still lives (redis_liveness.hpp) and takes it over when it does not.
// Repeats are kept as evidence in a list of that first copy's own, named
// after it ("idem:dups:{scope:hex}:..."), so a repeat is two plain commands
// (RPUSH, PEXPIREAT) whose count cannot stray into a later first copy's; the
// hash tag keeps every key of a fingerprint in one Redis Cluster slot.

#include "idem/store/fingerprints.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::store::detail {

[[nodiscard]] std::string fingerprint_key(std::string_view scope,
                                          const FingerprintBytes& fingerprint);
// The fingerprint in "idem:fp:{scope:hex}"; false when the key is not one.
[[nodiscard]] bool fingerprint_of(std::string_view key, FingerprintBytes& fingerprint);
// "idem:fp:{scope:hex}" -> "idem:dups:{scope:hex}", where an earlier idem
// kept every repeat of the fingerprint.
[[nodiscard]] std::string shared_evidence_key(std::string_view fingerprint_key);
// "idem:confirmed:OWNER"
[[nodiscard]] std::string confirmed_key(std::string_view owner);

// An owner that nobody needs to ask: a first copy an earlier idem (which
// kept fingerprints as hashes) had confirmed.
inline constexpr std::string_view k_no_owner = "-";

// What a first copy's key holds: "first_seen_us line batch expires_ms owner
// source", the source last (it may hold spaces; an owner id holds none).
struct FirstCopy {
    long long first_seen_us = 0; // its event time
    std::uint64_t line = 0;
    std::uint64_t batch = 0;  // of its owner's batches, counted from 1
    long long expires_ms = 0; // when the key expires (0: never), for its evidence
    std::string_view owner;
    std::string_view source;
};
[[nodiscard]] std::string encode_first_copy(const FirstCopy& first);
[[nodiscard]] std::optional<FirstCopy> decode_first_copy(std::string_view value);

// The list of this first copy's repeats: "idem:dups:{scope:hex}:first_seen_us:
// line:batch:owner", or the shared list an earlier idem kept for a first copy
// it had confirmed (owner k_no_owner).
[[nodiscard]] std::string evidence_key(std::string_view fingerprint_key, const FirstCopy& first);
// How many of its repeats its list no longer holds: "idem:notkept:..." with
// the same suffix as its list.
[[nodiscard]] std::string not_kept_key(std::string_view fingerprint_key, const FirstCopy& first);

// A repeat kept as evidence: "source:line event_time_us" (read from the
// right: the source may hold colons and spaces).
[[nodiscard]] std::string encode_evidence(std::string_view source, std::uint64_t line,
                                          long long event_time_us);
[[nodiscard]] bool decode_evidence(std::string_view entry, FingerprintRecord& record);

// What a claim does about the first copy it met in the store.
enum class MetFirstCopy {
    mine_again, // this process's own claim of this very record, sent again
                // after a lost connection: still the first copy
    claim_anew, // further than the window from it: this record is new
    repeat,     // confirmed, or this process's own: a repeat
    ask_owner,  // another process's batch it has not confirmed (yet)
};

// `owner_confirmed` is the last batch the met owner is known to have
// confirmed (0: none known).
[[nodiscard]] MetFirstCopy judge_met_first_copy(const FirstCopy& met, const FingerprintClaim& claim,
                                                std::string_view me, std::uint64_t my_batch,
                                                std::uint64_t owner_confirmed);

} // namespace idem::store::detail
