#pragma once
// The replay ledger (docs/replay.md): per idempotency key, whether a replay
// is in progress (under a lease), completed (with the response), or failed.
// A rerun reads it to skip what is done and to resume what a dead process
// left in progress, with the same key.

#include "idem/util/time.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store {

enum class ReplayState { in_progress, completed, failed };

[[nodiscard]] std::string_view replay_state_name(ReplayState state);

struct ReplayEntry {
    std::string key;
    ReplayState state = ReplayState::in_progress;
    std::string owner;          // in_progress: the run that holds the lease
    Timestamp lease_until;      // in_progress: another run may take over after this
    std::uint32_t attempts = 0; // requests sent for this key, over every run
    int status = 0;             // the last HTTP status (0: none came back)
    std::int64_t latency_ms = 0;
    bool permanent = false;      // failed: retrying cannot help (a 4xx)
    std::string error;           // failed: what went wrong ("http 422", "timeout", ...)
    std::string response_digest; // SHA-256 (hex) of the last response body
    std::string response_head;   // its first bytes
    Timestamp updated_at;
};

// Which finished keys a run sends again.
enum class ReplayRerun {
    resume,       // only keys never finished, or failed for a reason that may pass
    retry_failed, // also keys that failed for good (--retry-failed)
    force,        // also completed keys (--force)
};

// Whether a run may take `existing` (nullopt: never seen) now: a key no one
// holds, a lease that ran out because its process died, a failure that may
// pass; a completed or permanently failed key only when asked to. A key the
// run itself holds is not taken again (a repeat of it in the same input).
// The one rule every store applies.
[[nodiscard]] bool may_claim_replay(const std::optional<ReplayEntry>& existing, Timestamp now,
                                    ReplayRerun rerun);

struct ReplayClaim {
    bool granted = false;
    std::optional<ReplayEntry> previous; // the entry before this claim, if any
};

// The replay ledger role.
class ReplayLedgerStore {
public:
    virtual ~ReplayLedgerStore() = default;

    // Claims each key that may_claim_replay allows, within `scope`, as
    // in_progress for `owner` until `lease_until`, atomically against other
    // processes; results in key order. Claims are durable once commit()
    // returns: call it before sending, so a crash leaves the key in
    // progress and a rerun resends it.
    virtual std::vector<ReplayClaim> claim_replays(std::string_view scope,
                                                   const std::vector<std::string>& keys,
                                                   std::string_view owner, Timestamp now,
                                                   Timestamp lease_until, ReplayRerun rerun) = 0;
    // Extends the leases `owner` still holds (requests that take long).
    virtual void renew_replay_leases(std::string_view scope, const std::vector<std::string>& keys,
                                     std::string_view owner, Timestamp lease_until) = 0;
    // Records outcomes (completed or failed, or in_progress with attempts).
    virtual void save_replay_entries(std::string_view scope,
                                     const std::vector<ReplayEntry>& entries) = 0;
    virtual void for_each_replay_entry(std::string_view scope,
                                       const std::function<void(const ReplayEntry&)>& visit) = 0;
};

} // namespace idem::store
