#pragma once
// The store that subcommands share (docs/stores.md): a SQLite file by
// default, ":memory:", or redis://host:port[/db]. It speaks intent; no SQL or
// Redis command appears outside this module.

#include "idem/store/replay_ledger.hpp"
#include "idem/util/time.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <optional>
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
    // How much of a SQLite file to keep in memory: dedup's claims touch
    // random pages of a large B-tree; reorder's commits touch few.
    std::uint64_t cache_bytes = 256ULL << 20;

    // For messages: never includes a password.
    [[nodiscard]] std::string describe() const;
};

// Throws UsageError for a URI that names no store.
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

// A dedup fingerprint: 128 bits of a SHA-256 (see docs/dedup.md).
using FingerprintBytes = std::array<std::uint8_t, 16>;

// For hash tables of fingerprints: the bytes are already a cryptographic
// hash, so any eight of them will do.
struct FingerprintBytesHash {
    std::size_t operator()(const FingerprintBytes& bytes) const noexcept {
        std::size_t value = 0;
        std::memcpy(&value, bytes.data(), sizeof value);
        return value;
    }
};

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

// How far a run that owns its output files got, committed with its claims:
// a rerun cuts each file back to its committed size and skips the records
// already done, so a crash at any point ends, after a rerun, in exactly the
// output of one clean run.
struct Checkpoint {
    std::uint64_t records_done = 0;
    std::map<std::string, std::uint64_t> file_bytes; // by role: "output", "dups"
    // Set by a run that finished: which input it read (input_identity in
    // owned_files.hpp). A rerun over the same input, after a kill between
    // that last commit and the exit, finds its outputs complete and leaves
    // them; a run over any other input starts them anew.
    std::optional<std::uint64_t> finished_input;
};

// One copy of an event as dedup recorded it: the first, or a repeat kept as
// evidence of it (`audit --store` reads them).
struct FingerprintRecord {
    FingerprintBytes fingerprint{};
    bool first = true;
    Timestamp event_time;
    std::string source;
    std::uint64_t line = 0;
};

// One verdict `verify --keep-verdicts` kept, by where its record was:
// `audit --verdicts` puts it beside the same record.
struct VerdictRecord {
    std::string source;
    std::uint64_t line = 0;
    bool valid = false;
    std::string scheme;
    std::string message_id; // the delivery's id, when the scheme has one
    std::string reason;
    Timestamp checked_at;
};

// Reorder (docs/reorder.md): where each partition of a stream stands, and
// what it holds, so that the next run resumes where this one stopped.

// A position in a partition's order: a sequence number, or an event time
// in microseconds with a hybrid logical clock's counter.
struct OrderKey {
    std::int64_t primary = 0;
    std::uint64_t secondary = 0;
    friend auto operator<=>(const OrderKey&, const OrderKey&) = default;
};

struct PartitionProgress {
    std::string partition; // the encoded partition key
    bool started = false;  // false: its first sequence is not known yet
    OrderKey next;         // sequence: the next to release; time: the last released
    OrderKey highest;      // time: the highest stamp seen
};

struct HeldRecordRow {
    std::uint64_t id = 0; // arrival order, kept across runs
    std::string partition;
    OrderKey key;
    Timestamp arrival; // when it started waiting (event time or wall clock)
    std::string bytes;
};

// What changed since the last save: progress of the partitions that moved,
// records newly held, and held records (by id) that were released.
struct ReorderChanges {
    std::vector<PartitionProgress> progress;
    std::vector<HeldRecordRow> held;
    std::vector<std::uint64_t> released;
    [[nodiscard]] bool empty() const {
        return progress.empty() && held.empty() && released.empty();
    }
};

class Store {
public:
    virtual ~Store() = default;

    // Judges a sighting of `nonce` within `scope` by judge_nonce() against
    // what the store kept, keeps it when the rule says so, and forgets the
    // entry once the wall clock passes `keep_until`. Throws StoreError.
    virtual NonceClaim claim_nonce(std::string_view scope, std::string_view nonce,
                                   const NonceSighting& sighting, Duration window,
                                   Timestamp keep_until) = 0;

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

    // The checkpoint saved under `name`, if any.
    virtual std::optional<Checkpoint> load_checkpoint(std::string_view name) = 0;
    // Saves or deletes it within the transaction that commit() ends, so it
    // is durable exactly when the claims made with it are.
    virtual void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) = 0;
    virtual void clear_checkpoint(std::string_view name) = 0;

    // Every copy dedup recorded within `scope`, first copies before their
    // repeats. Throws StoreError; a :memory: store has none to give.
    virtual void
    for_each_fingerprint_record(std::string_view scope,
                                const std::function<void(const FingerprintRecord&)>& visit) = 0;

    // Reorder state within `scope`. Progress of each named partition (nullopt
    // when the store has none), every held record, and changes saved within
    // the transaction that commit() ends.
    virtual std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) = 0;
    virtual std::vector<HeldRecordRow> load_held(std::string_view scope) = 0;
    virtual void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) = 0;
    // Forgets the scope's progress and held records (`reorder --reset`).
    virtual void clear_reorder_state(std::string_view scope) = 0;

    // The replay ledger within `scope`. Claims each key that
    // may_claim_replay allows, as in_progress for `owner` until
    // `lease_until`, atomically against other processes; results in key
    // order. Claims are durable once commit() returns: call it before
    // sending, so a crash leaves the key in progress and a rerun resends it.
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

    // Verdicts within `scope`, saved within the transaction commit() ends;
    // one for a record already kept (same source and line) replaces it.
    virtual void save_verdicts(std::string_view scope,
                               const std::vector<VerdictRecord>& verdicts) = 0;
    virtual void for_each_verdict(std::string_view scope,
                                  const std::function<void(const VerdictRecord&)>& visit) = 0;

    // Deletes expired fingerprints and nonces; returns how many.
    virtual std::uint64_t collect_garbage(Timestamp now) = 0;

    // Makes every claim so far durable. Throws StoreError.
    virtual void commit() = 0;

    [[nodiscard]] virtual std::string describe() const = 0;
};

// Opens (and creates or migrates) the store. Throws StoreError naming it.
[[nodiscard]] std::unique_ptr<Store> open_store(const StoreLocation& location);

} // namespace idem::store
