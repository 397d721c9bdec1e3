#pragma once
// Why a group of records happened more than once (docs/audit.md), as pure
// logic: given the records of one group (the same idempotency key, or the
// same business fingerprint), find the causes the evidence supports, each
// with the records and gaps that show it. No I/O, no formatting.

#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace idem::audit {

enum class Cause {
    retry_storm,
    concurrent,
    ttl_expired,
    key_reuse,
    key_regenerated,
    retried_after_failure,
    unexplained
};

[[nodiscard]] std::string_view cause_name(Cause cause);
[[nodiscard]] std::optional<Cause> parse_cause(std::string_view name);
inline constexpr Cause k_all_causes[] = {Cause::retry_storm,     Cause::concurrent,
                                         Cause::ttl_expired,     Cause::key_reuse,
                                         Cause::key_regenerated, Cause::retried_after_failure,
                                         Cause::unexplained};

// What the receiver answered a record, when the evidence says: an HTTP
// status, k_no_answer (a dropped connection, a timeout), or 0 (unknown).
inline constexpr std::uint16_t k_no_answer = 1;
// Whether such an answer asks the sender to try again: 5xx, 408, 429, none.
[[nodiscard]] bool is_failed_answer(std::uint16_t status);

// One record as audit sees it. Strings are interned by the caller: ids
// compare as the values do; 0 means the field was absent.
struct Attempt {
    std::uint32_t key = 0;
    std::uint32_t fingerprint = 0;
    std::uint32_t source = 0;
    std::uint64_t payload = 0; // the first 64 bits of the payload's SHA-256
    std::optional<Timestamp> time;
    std::uint16_t status = 0; // what the receiver answered it, when known
};

// A key group: records sharing one idempotency key. A fingerprint group:
// records sharing one business intent, under more than one key.
enum class GroupKind { key, fingerprint };

struct ExplainOptions {
    Duration race_window = std::chrono::seconds(1);
    Duration ttl = std::chrono::hours(24);
    Duration window = std::chrono::hours(24);
};

struct Evidence {
    Cause cause = Cause::unexplained;
    // The records that show it (indexes into the group's records), and for
    // retry-storm, concurrent, ttl-expired and retried-after-failure, the
    // gaps between them.
    std::vector<std::size_t> records;
    std::vector<Duration> gaps;
    std::uint32_t source = 0; // retry-storm: whose attempts
};

struct Explanation {
    GroupKind kind = GroupKind::key;
    std::vector<std::size_t> records; // indexes into the attempts, in time order
    std::optional<Timestamp> first, last;
    std::vector<Duration> gaps;         // between consecutive timed records
    std::vector<std::uint32_t> sources; // distinct, in order of appearance
    std::size_t payloads = 0;           // distinct payloads
    std::size_t keys = 0;               // distinct keys
    std::vector<Evidence> causes;       // never empty: unexplained when nothing fits
};

// `members` index `attempts`; a group has two records or more.
[[nodiscard]] Explanation explain(GroupKind kind, std::vector<std::size_t> members,
                                  const std::vector<Attempt>& attempts,
                                  const ExplainOptions& options);

} // namespace idem::audit
