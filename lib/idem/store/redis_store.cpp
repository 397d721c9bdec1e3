#include "idem/store/checkpoints.hpp"
#include "idem/store/detail/backends.hpp"
#include "idem/store/detail/plays_roles.hpp"
#include "idem/store/detail/redis_cluster.hpp"
#include "idem/store/detail/redis_fingerprints.hpp"
#include "idem/store/detail/redis_held_copies.hpp"
#include "idem/store/detail/redis_liveness.hpp"
#include "idem/store/detail/redis_reorder.hpp"
#include "idem/store/detail/redis_replay.hpp"
#include "idem/store/detail/redis_verdicts.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/held_copies.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/owner.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace idem::store {

namespace {

using detail::Reply;
using detail::RoutedCommand;

std::vector<detail::RedisEndpoint> seeds_of(const StoreLocation& location) {
    std::vector<detail::RedisEndpoint> seeds;
    for (const auto& [host, port] : location.seeds)
        seeds.push_back({host, port});
    if (seeds.empty()) seeds.push_back({location.host, location.port});
    return seeds;
}

// Keys are single-key operations, so any name is Redis Cluster-safe; the
// prefix keeps idem's keys apart from an application's.
std::string nonce_key(std::string_view scope, std::string_view nonce) {
    return fmt::format("idem:nonce:{}:{}", scope, nonce);
}

// Redis, single node or Cluster, playing every role. Writes that must land
// together are queued (m_pending) and applied by commit() in one MULTI per
// slot.
class RedisStore final
    : public detail::PlaysRoles<FingerprintStore, EvidenceStore, NonceStore, CheckpointStore,
                                SequencerStore, HeldCopyStore, ReplayLedgerStore, VerdictStore,
                                WindowStore, EntityStore> {
public:
    explicit RedisStore(const StoreLocation& location)
        : m_location(location),
          m_redis(seeds_of(location), location.database, location.describe()) {}

    // The rule of judge_nonce() (nonces.hpp), in Lua so that the look and
    // the keep are one step for every process sharing the store; the tests
    // run one scenario through every store and compare the verdicts.
    NonceClaim claim_nonce(std::string_view scope, std::string_view nonce,
                           const NonceSighting& sighting, Duration window,
                           Timestamp keep_until) override {
        auto key = nonce_key(scope, nonce);
        auto keep_ms = std::max<long long>(
            1,
            std::chrono::duration_cast<std::chrono::milliseconds>(keep_until - now_utc()).count());
        auto sha = load_script(m_nonce_script, k_nonce_lua);
        // On a replica too before the verdict counts: a nonce lost in a
        // failover would let the same delivery pass again.
        auto reply = std::move(
            m_redis
                .pipeline({{{"EVALSHA", sha, "1", key,
                             std::to_string(sighting.received_at.time_since_epoch().count()),
                             std::string(sighting.source), std::to_string(sighting.line),
                             std::to_string(window.count()), std::to_string(keep_ms)},
                            key}},
                          detail::Retry::safe, detail::ErrorReplies::fail, detail::Replicas::wait)
                .front());
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 2)
            throw StoreError(
                fmt::format("store {}: unexpected reply to a nonce claim", m_location.describe()));
        NonceClaim claim;
        auto verdict = integer_of(reply->element[0]);
        claim.verdict = verdict == 1   ? NonceVerdict::replay
                        : verdict == 2 ? NonceVerdict::same_record
                                       : NonceVerdict::fresh;
        if (claim.verdict != NonceVerdict::fresh)
            claim.first_seen = Timestamp(Duration(integer_of(reply->element[1])));
        return claim;
    }

    // Pipelined: every claim of the batch is sent before the first reply is
    // read, so a batch costs one round trip, not one per record. A new
    // fingerprint is one `SET NX PXAT GET`; a fingerprint already there
    // comes back with the claim's reply and is judged here
    // (judge_met_first_copy), then counted as a repeat, or claimed anew by
    // a script that first checks it is still what was met (settle_met). A
    // first copy of another process's unconfirmed batch is counted once that
    // owner is known to be alive, and taken over once it is known dead.
    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp now) override {
        (void)now; // Redis expires keys itself
        std::vector<FingerprintResult> results(claims.size());
        if (claims.empty()) return results;
        load_script(m_take_script, k_take_lua);
        if (!m_heartbeat)
            m_heartbeat = std::make_unique<detail::Heartbeat>(
                seeds_of(m_location), m_location.database, m_location.describe(), m_owner);
        std::vector<std::string> keys;
        std::vector<std::string> values; // what this record's claim puts in the store
        keys.reserve(claims.size());
        values.reserve(claims.size());
        for (const auto& claim : claims) {
            keys.push_back(detail::fingerprint_key(scope, claim.fingerprint));
            values.push_back(
                detail::encode_first_copy({claim.event_time.time_since_epoch().count(), claim.line,
                                           m_batch, expiry_ms(claim), m_owner, claim.source}));
        }
        std::vector<std::size_t> setting(claims.size());
        for (std::size_t i = 0; i < claims.size(); ++i)
            setting[i] = i;
        while (!setting.empty()) {
            std::vector<RoutedCommand> batch;
            batch.reserve(setting.size());
            for (auto i : setting)
                batch.push_back({{"SET", keys[i], values[i], "NX", "PXAT",
                                  std::to_string(expiry_ms(claims[i])), "GET"},
                                 keys[i]});
            // On a replica too before a record is written out as a first
            // copy: a claim lost in a failover would be a first copy twice.
            auto replies = m_redis.pipeline(batch, detail::Retry::safe,
                                            detail::ErrorReplies::returned, detail::Replicas::wait);
            std::vector<std::size_t> hashes; // kept by an earlier idem
            std::vector<std::pair<std::size_t, std::string>> met;
            for (std::size_t n = 0; n < setting.size(); ++n) {
                auto i = setting[n];
                const auto* reply = replies[n].get();
                if (reply->type == REDIS_REPLY_NIL)
                    claimed(claims[i], results[i]);
                else if (reply->type == REDIS_REPLY_STRING)
                    met.emplace_back(i, string_of(reply));
                else if (detail::error_starts(reply, "WRONGTYPE"))
                    hashes.push_back(i);
                else
                    throw unexpected_reply("a claim", reply);
            }
            setting = settle_met(claims, keys, values, met, results);
            if (!hashes.empty()) {
                convert_earlier_layout(keys, hashes);
                setting.insert(setting.end(), hashes.begin(), hashes.end());
            }
        }
        return results;
    }

    // Not in one transaction with the claims (Redis has none across a
    // pipeline): see docs/dedup.md on what a crash can do with Redis.
    void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                             Timestamp) override {
        // Its own evidence list, if it has one yet, is named after it and
        // expires with it; no later first copy shares that name.
        auto key = detail::fingerprint_key(scope, fingerprint);
        m_pending.push_back({"DEL", key});
    }

    std::optional<Checkpoint> load_checkpoint(std::string_view name) override {
        auto key = checkpoint_key(name);
        auto reply = m_redis.command({"HGETALL", key}, key);
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements == 0) return std::nullopt;
        Checkpoint checkpoint;
        for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
            auto field = string_of(reply->element[i]);
            auto value = static_cast<std::uint64_t>(integer_of(reply->element[i + 1]));
            if (field == "records_done")
                checkpoint.records_done = value;
            else if (field.starts_with("file:"))
                checkpoint.file_bytes[field.substr(5)] = value;
            else if (field == "finished_input")
                checkpoint.finished_input = value;
            else if (field.starts_with("count:"))
                checkpoint.counts[field.substr(6)] = value;
        }
        return checkpoint;
    }

    void save_checkpoint(std::string_view name, const Checkpoint& checkpoint) override {
        std::vector<std::string> arguments{"HSET", checkpoint_key(name), "records_done",
                                           std::to_string(checkpoint.records_done)};
        for (const auto& [role, bytes] : checkpoint.file_bytes) {
            arguments.push_back("file:" + role);
            arguments.push_back(std::to_string(bytes));
        }
        if (checkpoint.finished_input) {
            arguments.push_back("finished_input");
            arguments.push_back(std::to_string(*checkpoint.finished_input));
        }
        for (const auto& [counted, count] : checkpoint.counts) {
            arguments.push_back("count:" + counted);
            arguments.push_back(std::to_string(count));
        }
        m_pending.push_back({"DEL", checkpoint_key(name)});
        m_pending.push_back(std::move(arguments));
    }

    void clear_checkpoint(std::string_view name) override {
        m_pending.push_back({"DEL", checkpoint_key(name)});
    }

    // SCAN for the scope's fingerprints (one hash slot each), then each
    // one's first copy, then its evidence list (named after the first copy),
    // pipelined per page. A fingerprint an earlier idem kept as a hash is
    // read as one.
    void for_each_fingerprint_record(
        std::string_view scope,
        const std::function<void(const FingerprintRecord&)>& visit) override {
        auto pattern = fmt::format("idem:fp:{{{}:*", scope);
        // A cluster spreads the scope's fingerprints over every master.
        for (std::size_t master = 0; master < m_redis.masters(); ++master) {
            std::string cursor = "0";
            do {
                auto page = m_redis.command_on_master(
                    master, {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"});
                if (page->type != REDIS_REPLY_ARRAY || page->elements != 2)
                    throw StoreError(
                        fmt::format("store {}: unexpected reply to SCAN", m_location.describe()));
                cursor = string_of(page->element[0]);
                std::vector<std::string> keys;
                std::vector<RoutedCommand> reads;
                for (std::size_t i = 0; i < page->element[1]->elements; ++i) {
                    keys.push_back(string_of(page->element[1]->element[i]));
                    reads.push_back({{"GET", keys.back()}, keys.back()});
                }
                auto firsts =
                    m_redis.pipeline(reads, detail::Retry::safe, detail::ErrorReplies::returned);
                std::vector<FingerprintRecord> records;
                reads.clear();
                for (std::size_t k = 0; k < keys.size(); ++k) {
                    FingerprintRecord record;
                    std::string evidence;
                    std::string not_kept;
                    if (!detail::fingerprint_of(keys[k], record.fingerprint) ||
                        !read_first_copy(keys[k], firsts[k].get(), record, evidence, not_kept))
                        continue; // not idem's, or expired between SCAN and GET
                    records.push_back(std::move(record));
                    reads.push_back({{"LRANGE", evidence, "0", "-1"}, keys[k]});
                    reads.push_back({{"GET", not_kept}, keys[k]});
                }
                auto repeats = m_redis.pipeline(reads);
                for (std::size_t k = 0; k < records.size(); ++k) {
                    auto& record = records[k];
                    visit(record);
                    record.first = false;
                    const auto* list = repeats[2 * k].get();
                    if (list->type != REDIS_REPLY_ARRAY) continue;
                    // The list's last entry is the latest repeat; the ones
                    // before it past the bound were only counted.
                    auto not_kept =
                        static_cast<std::uint64_t>(integer_of(repeats[2 * k + 1].get()));
                    for (std::size_t i = 0; i < list->elements; ++i) {
                        record.copies_not_kept = i + 1 == list->elements ? not_kept : 0;
                        if (detail::decode_evidence(string_of(list->element[i]), record))
                            visit(record);
                    }
                }
            } while (cursor != "0");
        }
    }

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions) override {
        std::vector<std::optional<PartitionProgress>> found(partitions.size());
        constexpr std::size_t k_fields_per_command = 1000;
        auto key = detail::reorder_key(scope, "progress");
        for (std::size_t begin = 0; begin < partitions.size(); begin += k_fields_per_command) {
            auto end = std::min(partitions.size(), begin + k_fields_per_command);
            std::vector<std::string> arguments{"HMGET", key};
            arguments.insert(arguments.end(), partitions.begin() + static_cast<long>(begin),
                             partitions.begin() + static_cast<long>(end));
            auto reply = m_redis.command(arguments, key);
            for (std::size_t i = begin; i < end && i - begin < reply->elements; ++i) {
                const auto* value = reply->element[i - begin];
                if (value->type != REDIS_REPLY_STRING) continue;
                found[i] = detail::decode_progress(partitions[i],
                                                   std::string_view(value->str, value->len));
            }
        }
        return found;
    }

    std::vector<HeldRecordRow> load_held(std::string_view scope) override {
        auto key = detail::reorder_key(scope, "held");
        auto reply = m_redis.command({"HGETALL", key}, key);
        std::vector<HeldRecordRow> rows;
        for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
            auto row =
                detail::decode_held(string_of(reply->element[i]), string_of(reply->element[i + 1]));
            if (!row)
                throw StoreError(fmt::format("store {}: a held record of scope {} is damaged",
                                             m_location.describe(), scope));
            rows.push_back(std::move(*row));
        }
        std::sort(rows.begin(), rows.end(),
                  [](const auto& left, const auto& right) { return left.id < right.id; });
        return rows;
    }

    // Queued, and applied in one MULTI/EXEC by commit().
    void save_reorder_changes(std::string_view scope, const ReorderChanges& changes) override {
        constexpr std::size_t k_fields_per_command = 1000;
        auto progress_key = detail::reorder_key(scope, "progress");
        for (std::size_t begin = 0; begin < changes.progress.size();
             begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HSET", progress_key};
            for (std::size_t i = begin;
                 i < std::min(changes.progress.size(), begin + k_fields_per_command); ++i) {
                arguments.push_back(changes.progress[i].partition);
                arguments.push_back(detail::encode_progress(changes.progress[i]));
            }
            m_pending.push_back(std::move(arguments));
        }
        auto held_key = detail::reorder_key(scope, "held");
        for (const auto& row : changes.held)
            m_pending.push_back(
                {"HSET", held_key, std::to_string(row.id), detail::encode_held(row)});
        for (std::size_t begin = 0; begin < changes.released.size();
             begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HDEL", held_key};
            for (std::size_t i = begin;
                 i < std::min(changes.released.size(), begin + k_fields_per_command); ++i)
                arguments.push_back(std::to_string(changes.released[i]));
            m_pending.push_back(std::move(arguments));
        }
    }

    // Queued, and applied in one MULTI/EXEC by commit().
    void save_verdicts(std::string_view scope,
                       const std::vector<VerdictRecord>& verdicts) override {
        constexpr std::size_t k_fields_per_command = 1000;
        auto key = detail::verdicts_key(scope);
        for (std::size_t begin = 0; begin < verdicts.size(); begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HSET", key};
            for (std::size_t i = begin; i < std::min(verdicts.size(), begin + k_fields_per_command);
                 ++i) {
                arguments.push_back(detail::verdict_field(verdicts[i]));
                arguments.push_back(detail::encode_verdict(verdicts[i]));
            }
            m_pending.push_back(std::move(arguments));
        }
    }

    // HSCAN, a page at a time: a scope may hold millions.
    void for_each_verdict(std::string_view scope,
                          const std::function<void(const VerdictRecord&)>& visit) override {
        auto key = detail::verdicts_key(scope);
        std::string cursor = "0";
        do {
            auto page = m_redis.command({"HSCAN", key, cursor, "COUNT", "1000"}, key);
            if (page->type != REDIS_REPLY_ARRAY || page->elements != 2)
                throw StoreError(
                    fmt::format("store {}: unexpected reply to HSCAN", m_location.describe()));
            cursor = string_of(page->element[0]);
            const auto* items = page->element[1];
            for (std::size_t i = 0; i + 1 < items->elements; i += 2) {
                auto verdict = detail::decode_verdict(string_of(items->element[i]),
                                                      string_of(items->element[i + 1]));
                if (!verdict)
                    throw StoreError(fmt::format("store {}: a verdict of scope {} is damaged",
                                                 m_location.describe(), scope));
                visit(*verdict);
            }
        } while (cursor != "0");
    }

    void clear_reorder_state(std::string_view scope) override {
        m_pending.push_back(
            {"DEL", detail::reorder_key(scope, "progress"), detail::reorder_key(scope, "held")});
    }

    std::vector<ReplayClaim> claim_replays(std::string_view scope,
                                           const std::vector<std::string>& keys,
                                           std::string_view owner, Timestamp now,
                                           Timestamp lease_until, ReplayRerun rerun) override {
        apply_pending(); // outcomes saved before must land before these claims read them
        auto sha = load_script(m_replay_claim_script, detail::k_replay_claim_lua);
        std::vector<RoutedCommand> batch;
        for (const auto& key : keys) {
            auto name = detail::replay_key(scope, key);
            batch.push_back({{"EVALSHA", sha, "1", name, std::string(owner),
                              std::to_string(now.time_since_epoch().count()),
                              std::to_string(lease_until.time_since_epoch().count()),
                              std::to_string(static_cast<int>(rerun))},
                             name});
        }
        // Never sent again: a claim that ran would then meet itself, in
        // progress under this owner, and the key would be skipped. On a
        // replica before a request goes out: one lost in a failover would
        // let a rerun send it again.
        auto replies = m_redis.pipeline(batch, detail::Retry::never, detail::ErrorReplies::fail,
                                        detail::Replicas::wait);
        std::vector<ReplayClaim> claims;
        claims.reserve(keys.size());
        for (std::size_t k = 0; k < keys.size(); ++k) {
            const auto& key = keys[k];
            const auto& reply = replies[k];
            auto& claim = claims.emplace_back();
            if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 12)
                throw StoreError(fmt::format("store {}: unexpected reply to a replay claim",
                                             m_location.describe()));
            claim.granted = integer_of(reply->element[0]) == 1;
            std::vector<std::string> values;
            for (std::size_t i = 1; i < reply->elements; ++i)
                values.push_back(string_of(reply->element[i]));
            claim.previous = detail::replay_entry_from(key, values);
        }
        return claims;
    }

    void renew_replay_leases(std::string_view scope, const std::vector<std::string>& keys,
                             std::string_view owner, Timestamp lease_until) override {
        auto sha = load_script(m_replay_renew_script, detail::k_replay_renew_lua);
        std::vector<RoutedCommand> batch;
        for (const auto& key : keys) {
            auto name = detail::replay_key(scope, key);
            batch.push_back({{"EVALSHA", sha, "1", name, std::string(owner),
                              std::to_string(lease_until.time_since_epoch().count())},
                             name});
        }
        (void)m_redis.pipeline(batch);
    }

    void save_replay_entries(std::string_view scope,
                             const std::vector<ReplayEntry>& entries) override {
        for (const auto& entry : entries) {
            std::vector<std::string> arguments = {"HSET", detail::replay_key(scope, entry.key)};
            for (auto& field : detail::replay_fields(entry))
                arguments.push_back(std::move(field));
            m_pending.push_back(std::move(arguments));
        }
    }

    void for_each_replay_entry(std::string_view scope,
                               const std::function<void(const ReplayEntry&)>& visit) override {
        auto prefix = detail::replay_key(scope, "");
        prefix.pop_back(); // "idem:replay:{scope:"
        for (std::size_t master = 0; master < m_redis.masters(); ++master) {
            std::string cursor = "0";
            do {
                auto page = m_redis.command_on_master(
                    master,
                    {"SCAN", cursor, "MATCH", detail::replay_scan_pattern(scope), "COUNT", "1000"});
                cursor = string_of(page->element[0]);
                const auto* names = page->element[1];
                for (std::size_t i = 0; i < names->elements; ++i) {
                    auto name = string_of(names->element[i]);
                    if (name.size() <= prefix.size() + 1) continue;
                    auto key = name.substr(prefix.size(), name.size() - prefix.size() - 1);
                    auto reply = m_redis.command({"HMGET", name, "state", "owner", "lease",
                                                  "attempts", "status", "latency", "permanent",
                                                  "error", "digest", "head", "updated"},
                                                 name);
                    std::vector<std::string> values;
                    for (std::size_t j = 0; j < reply->elements; ++j)
                        values.push_back(string_of(reply->element[j]));
                    if (auto entry = detail::replay_entry_from(key, values)) visit(*entry);
                }
            } while (cursor != "0");
        }
    }

    std::vector<HeldCopyRow> load_held_copies(std::string_view name) override {
        auto key = detail::held_copies_key(name);
        auto reply = m_redis.command({"HGETALL", key}, key);
        std::vector<HeldCopyRow> rows;
        for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
            auto row = detail::decode_held_copy(string_of(reply->element[i]),
                                                string_of(reply->element[i + 1]));
            if (!row) throw damaged_held_copy();
            rows.push_back(std::move(*row));
        }
        for (auto& legacy : load_held(detail::legacy_held_copies_scope(name))) {
            auto row = detail::held_copy_of_legacy(legacy);
            if (!row) throw damaged_held_copy();
            rows.push_back(std::move(*row));
        }
        std::sort(rows.begin(), rows.end(),
                  [](const auto& left, const auto& right) { return left.id < right.id; });
        return rows;
    }

    // Queued, and applied in one MULTI/EXEC by commit(). A copy an older
    // idem held (the legacy layout) is saved anew when it is saved again.
    void save_held_copies(std::string_view name, const HeldCopyChanges& changes) override {
        constexpr std::size_t k_fields_per_command = 1000;
        auto key = detail::held_copies_key(name);
        for (const auto& row : changes.held)
            m_pending.push_back(
                {"HSET", key, std::to_string(row.id), detail::encode_held_copy(row)});
        if (changes.released.empty()) return;
        ReorderChanges legacy;
        legacy.released = changes.released;
        save_reorder_changes(detail::legacy_held_copies_scope(name), legacy);
        for (std::size_t begin = 0; begin < changes.released.size();
             begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HDEL", key};
            for (std::size_t i = begin;
                 i < std::min(changes.released.size(), begin + k_fields_per_command); ++i)
                arguments.push_back(std::to_string(changes.released[i]));
            m_pending.push_back(std::move(arguments));
        }
    }

    // One hash per run, "idem:merge:{name}": the field is the window's key,
    // the empty field the meta.
    std::vector<std::pair<std::string, std::string>> load_windows(std::string_view name,
                                                                  std::string& meta) override {
        auto key = windows_key(name);
        auto reply = m_redis.command({"HGETALL", key}, key);
        std::vector<std::pair<std::string, std::string>> windows;
        meta.clear();
        for (std::size_t i = 0; i + 1 < reply->elements; i += 2) {
            auto field = string_of(reply->element[i]);
            auto state = string_of(reply->element[i + 1]);
            if (field.empty())
                meta = std::move(state);
            else
                windows.emplace_back(std::move(field), std::move(state));
        }
        return windows;
    }

    // Queued, and applied in one MULTI/EXEC by commit().
    void save_windows(std::string_view name, const WindowChanges& changes) override {
        constexpr std::size_t k_fields_per_command = 1000;
        auto key = windows_key(name);
        for (std::size_t begin = 0; begin < changes.saved.size(); begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HSET", key};
            for (std::size_t i = begin;
                 i < std::min(changes.saved.size(), begin + k_fields_per_command); ++i) {
                arguments.push_back(changes.saved[i].first);
                arguments.push_back(changes.saved[i].second);
            }
            m_pending.push_back(std::move(arguments));
        }
        for (std::size_t begin = 0; begin < changes.removed.size(); begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HDEL", key};
            for (std::size_t i = begin;
                 i < std::min(changes.removed.size(), begin + k_fields_per_command); ++i)
                arguments.push_back(changes.removed[i]);
            m_pending.push_back(std::move(arguments));
        }
        m_pending.push_back({"HSET", key, "", changes.meta});
    }

    void clear_windows(std::string_view name) override {
        m_pending.push_back({"DEL", windows_key(name)});
    }

    // One hash per scope, "idem:states:{scope}": entity -> state.
    std::vector<std::optional<std::string>>
    load_entities(std::string_view scope, const std::vector<std::string>& entities) override {
        apply_pending(); // states saved before must land before they are read
        std::vector<std::optional<std::string>> found(entities.size());
        constexpr std::size_t k_fields_per_command = 1000;
        auto key = entities_key(scope);
        for (std::size_t begin = 0; begin < entities.size(); begin += k_fields_per_command) {
            auto end = std::min(entities.size(), begin + k_fields_per_command);
            std::vector<std::string> arguments{"HMGET", key};
            arguments.insert(arguments.end(), entities.begin() + static_cast<long>(begin),
                             entities.begin() + static_cast<long>(end));
            auto reply = m_redis.command(arguments, key);
            for (std::size_t i = begin; i < end && i - begin < reply->elements; ++i) {
                const auto* value = reply->element[i - begin];
                if (value->type == REDIS_REPLY_STRING)
                    found[i] = std::string(value->str, value->len);
            }
        }
        return found;
    }

    // Queued, and applied in one MULTI/EXEC by commit().
    void save_entities(std::string_view scope,
                       const std::vector<std::pair<std::string, std::string>>& states) override {
        constexpr std::size_t k_fields_per_command = 1000;
        auto key = entities_key(scope);
        for (std::size_t begin = 0; begin < states.size(); begin += k_fields_per_command) {
            std::vector<std::string> arguments{"HSET", key};
            for (std::size_t i = begin; i < std::min(states.size(), begin + k_fields_per_command);
                 ++i) {
                arguments.push_back(states[i].first);
                arguments.push_back(states[i].second);
            }
            m_pending.push_back(std::move(arguments));
        }
    }

    void clear_entities(std::string_view scope) override {
        m_pending.push_back({"DEL", entities_key(scope)});
    }

    void clear_held_copies(std::string_view name) override {
        m_pending.push_back({"DEL", detail::held_copies_key(name)});
        clear_reorder_state(detail::legacy_held_copies_scope(name));
    }

    // Once a batch's output is flushed, one write confirms every first copy
    // it claimed: "idem:confirmed:OWNER" says the last batch confirmed, and
    // lives as long as the longest-lived of them. A process that dies before
    // stops beating its heartbeat, and the next claim that meets one of its
    // unconfirmed first copies takes it over (docs/dedup.md), so a rerun
    // emits the batch again instead of losing it.
    void commit() override {
        apply_pending(); // the checkpoint first: confirmed claims never run ahead of it
        if (!m_batch_claimed) return;
        auto key = detail::confirmed_key(m_owner);
        (void)m_redis.command(
            {"SET", key, std::to_string(m_batch), "PXAT", std::to_string(m_confirmed_until_ms)},
            key);
        ++m_batch;
        m_batch_claimed = false;
    }

    std::string describe() const override { return m_location.describe(); }

private:
    [[nodiscard]] StoreError damaged_held_copy() const {
        return StoreError(fmt::format("store {}: a copy held by dedup --keep last is damaged",
                                      m_location.describe()));
    }

    // Makes ARGV[2] the first copy of KEYS[1], expiring at ARGV[3] ms, if it
    // still holds what a claim met (ARGV[1]), dropping the evidence kept for
    // that one (KEYS[2]); answers {1}, else {0, what it holds now}.
    static constexpr const char* k_take_lua = R"lua(
local v = redis.call('GET', KEYS[1])
if v ~= ARGV[1] then return {0, v} end
redis.call('DEL', KEYS[2])
redis.call('SET', KEYS[1], ARGV[2], 'PXAT', ARGV[3])
return {1}
)lua";

    // Bounds an event's evidence list (KEYS[1]) to ARGV[2] entries, the
    // first ones and the latest, counting what it drops in KEYS[2] (which
    // expires at ARGV[1] ms; 0: never); answers what had been dropped
    // before. Only a list past its bound is given to it, so it runs once per
    // batch for an event already repeated that often, never for the others.
    static constexpr const char* k_bound_lua = R"lua(
local n = redis.call('LLEN', KEYS[1])
local keep = tonumber(ARGV[2])
local dropped = tonumber(redis.call('GET', KEYS[2]) or '0')
if n > keep then
  local latest = redis.call('LINDEX', KEYS[1], -1)
  redis.call('LTRIM', KEYS[1], 0, keep - 2)
  redis.call('RPUSH', KEYS[1], latest)
  redis.call('INCRBY', KEYS[2], n - keep)
  if ARGV[1] ~= '0' then redis.call('PEXPIREAT', KEYS[2], ARGV[1]) end
end
return dropped
)lua";

    // A fingerprint an earlier idem kept as a hash (first_seen, count,
    // source, line, owner) becomes the string a claim reads now, with its
    // expiry: confirmed (owner "-") when it had no owner, so its repeats stay
    // in the shared list it kept them in; else batch 1 of its owner, which
    // confirmed none under this layout (so it is asked). Answers 0 for a key
    // of another type: not idem's.
    static constexpr const char* k_convert_lua = R"lua(
local t = redis.call('TYPE', KEYS[1]).ok
if t == 'string' or t == 'none' then return 1 end -- another process converted it, or it expired
if t ~= 'hash' then return 0 end
local h = redis.call('HMGET', KEYS[1], 'first_seen', 'source', 'line', 'owner')
local ttl = redis.call('PTTL', KEYS[1])
redis.call('DEL', KEYS[1])
if not h[1] or ttl == -2 then return 1 end
local expires = 0
if ttl > 0 then
  local now = redis.call('TIME')
  expires = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + ttl
end
local value = h[1] .. ' ' .. (h[3] or '0') .. ' ' .. (h[4] and '1 ' or '0 ') .. expires .. ' ' ..
              (h[4] or '-') .. ' ' .. (h[2] or '')
if ttl > 0 then
  redis.call('SET', KEYS[1], value, 'PX', ttl)
else
  redis.call('SET', KEYS[1], value)
end
return 1
)lua";

    // KEYS[1] the nonce; ARGV: received_at_us, source, line, window_us,
    // keep_ms. Returns {verdict, first_seen_us}: 0 fresh, 1 replay, 2 the
    // same record. A value left by an earlier version (a plain string of
    // first_seen) reads as a sighting of no known record.
    static constexpr const char* k_nonce_lua = R"lua(
local first, source, line
if redis.call('TYPE', KEYS[1]).ok == 'string' then
  first = redis.call('GET', KEYS[1])
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], 'first', first)
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
else
  local v = redis.call('HMGET', KEYS[1], 'first', 'source', 'line')
  first, source, line = v[1], v[2], v[3]
end
local function keep()
  redis.call('HSET', KEYS[1], 'first', ARGV[1], 'source', ARGV[2], 'line', ARGV[3])
  redis.call('PEXPIRE', KEYS[1], ARGV[5])
  return {0, tonumber(ARGV[1])}
end
if not first then return keep() end
local at, seen, window = tonumber(ARGV[1]), tonumber(first), tonumber(ARGV[4])
if source == ARGV[2] and line == ARGV[3] and seen == at then return {2, seen} end
if at > seen + window then return keep() end
if at < seen - window then return {0, at} end
if at >= seen then return {1, seen} end
return keep()
)lua";

    // Judges the first copies the claims met (index, value): a repeat is
    // kept in that first copy's own evidence list (two plain commands, its
    // count the list's length); a first copy claimed anew or taken over is
    // replaced by the take script, only if it still holds what was met.
    // Answers the claims whose fingerprint vanished meanwhile, to be claimed
    // again.
    std::vector<std::size_t> settle_met(const std::vector<FingerprintClaim>& claims,
                                        const std::vector<std::string>& keys,
                                        const std::vector<std::string>& values,
                                        std::vector<std::pair<std::size_t, std::string>> met,
                                        std::vector<FingerprintResult>& results) {
        std::vector<std::size_t> vanished;
        while (!met.empty()) {
            std::vector<detail::FirstCopy> firsts;
            std::vector<detail::MetFirstCopy> verdicts;
            std::vector<std::string> owners_to_ask;
            for (const auto& [i, value] : met) {
                auto first = detail::decode_first_copy(value);
                if (!first)
                    throw StoreError(fmt::format("store {}: fingerprint {} holds a damaged value",
                                                 m_location.describe(), keys[i]));
                auto owner = std::string(first->owner);
                auto verdict = detail::judge_met_first_copy(*first, claims[i], m_owner, m_batch,
                                                            m_confirmed_batches[owner]);
                if (verdict == detail::MetFirstCopy::ask_owner) owners_to_ask.push_back(owner);
                firsts.push_back(*first);
                verdicts.push_back(verdict);
            }
            resolve_owners(firsts, verdicts, owners_to_ask);
            std::vector<RoutedCommand> batch;
            std::vector<std::size_t> settling; // indexes into met, in the order sent
            for (std::size_t n = 0; n < met.size(); ++n) {
                auto i = met[n].first;
                if (verdicts[n] == detail::MetFirstCopy::mine_again) {
                    claimed(claims[i], results[i]);
                    continue;
                }
                auto evidence = detail::evidence_key(keys[i], firsts[n]);
                settling.push_back(n);
                if (verdicts[n] == detail::MetFirstCopy::repeat) {
                    batch.push_back(
                        {{"RPUSH", evidence,
                          detail::encode_evidence(claims[i].source, claims[i].line,
                                                  claims[i].event_time.time_since_epoch().count())},
                         keys[i]});
                    // Expiring with its first copy (whose value says when).
                    if (firsts[n].expires_ms > 0)
                        batch.push_back(
                            {{"PEXPIREAT", evidence, std::to_string(firsts[n].expires_ms)},
                             keys[i]});
                } else { // claim_anew: resolve_owners left no ask_owner
                    batch.push_back(
                        {{"EVALSHA", m_take_script, "2", keys[i], evidence, met[n].second,
                          values[i], std::to_string(expiry_ms(claims[i]))},
                         keys[i]});
                }
            }
            auto replies = m_redis.pipeline(batch);
            std::vector<std::pair<std::size_t, std::string>> changed;
            std::vector<std::pair<std::size_t, std::size_t>> overflowing; // claim, met
            std::size_t r = 0;
            for (std::size_t k = 0; k < settling.size(); ++k) {
                auto n = settling[k];
                auto i = met[n].first;
                const auto* reply = replies[r++].get();
                if (verdicts[n] == detail::MetFirstCopy::repeat) {
                    if (firsts[n].expires_ms > 0) ++r; // PEXPIREAT's
                    if (reply->type != REDIS_REPLY_INTEGER)
                        throw unexpected_reply("a repeat's evidence", reply);
                    auto& result = results[i];
                    result.first = false;
                    result.seen_count = static_cast<std::uint64_t>(reply->integer) + 1;
                    result.first_seen = Timestamp(Duration(firsts[n].first_seen_us));
                    result.first_source = std::string(firsts[n].source);
                    result.first_line = firsts[n].line;
                    if (static_cast<std::uint64_t>(reply->integer) > k_kept_repeats + 1)
                        overflowing.push_back({i, n});
                    continue;
                }
                if (reply->type != REDIS_REPLY_ARRAY || reply->elements < 1)
                    throw unexpected_reply("a claim", reply);
                if (integer_of(reply->element[0]) == 1) {
                    claimed(claims[i], results[i]);
                } else if (reply->elements > 1 && reply->element[1]->type == REDIS_REPLY_STRING) {
                    changed.emplace_back(i, string_of(reply->element[1])); // look again
                } else {
                    vanished.push_back(i);
                }
            }
            bound_evidence(keys, firsts, overflowing, results);
            met = std::move(changed);
        }
        return vanished;
    }

    // Repeats past the ones an event keeps (the first k_kept_repeats and the
    // latest): one bound script per event trims its list and counts what it
    // dropped. A repeat's count is then its place when pushed plus what had
    // been dropped before: every push of this batch came before its trim.
    // (Another process trimming the same event in between makes a count
    // that high too; docs/dedup.md.)
    void bound_evidence(const std::vector<std::string>& keys,
                        const std::vector<detail::FirstCopy>& firsts,
                        const std::vector<std::pair<std::size_t, std::size_t>>& overflowing,
                        std::vector<FingerprintResult>& results) {
        if (overflowing.empty()) return;
        load_script(m_bound_script, k_bound_lua);
        std::map<std::string, std::size_t> script_of; // evidence list -> its script's reply
        std::vector<RoutedCommand> batch;
        std::vector<std::size_t> reply_of(overflowing.size());
        for (std::size_t k = 0; k < overflowing.size(); ++k) {
            auto [i, n] = overflowing[k];
            auto evidence = detail::evidence_key(keys[i], firsts[n]);
            auto [at, added] = script_of.try_emplace(evidence, batch.size());
            reply_of[k] = at->second;
            if (!added) continue;
            batch.push_back(
                {{"EVALSHA", m_bound_script, "2", evidence,
                  detail::not_kept_key(keys[i], firsts[n]), std::to_string(firsts[n].expires_ms),
                  std::to_string(k_kept_repeats + 1)},
                 keys[i]});
        }
        auto replies = m_redis.pipeline(batch);
        for (const auto& reply : replies)
            if (reply->type != REDIS_REPLY_INTEGER)
                throw unexpected_reply("a repeat's evidence", reply.get());
        for (std::size_t k = 0; k < overflowing.size(); ++k)
            // seen_count holds 1 + the place it was pushed at.
            results[overflowing[k].first].seen_count +=
                static_cast<std::uint64_t>(replies[reply_of[k]]->integer);
    }

    // Settles the claims that met another owner's unconfirmed batch: the
    // owners' confirmations are read; an owner still behind and alive makes
    // the record a repeat; a dead one's confirmations are read once more,
    // since a process that ends confirms its last batch before its heartbeat
    // goes, and what is still unconfirmed is taken over.
    void resolve_owners(const std::vector<detail::FirstCopy>& firsts,
                        std::vector<detail::MetFirstCopy>& verdicts,
                        std::vector<std::string>& owners) {
        if (owners.empty()) return;
        std::sort(owners.begin(), owners.end());
        owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
        read_confirmed_batches(owners);
        std::map<std::string, bool, std::less<>> owner_alive;
        for (std::size_t n = 0; n < firsts.size(); ++n) {
            auto owner = std::string(firsts[n].owner);
            if (verdicts[n] == detail::MetFirstCopy::ask_owner &&
                firsts[n].batch > m_confirmed_batches[owner] && !owner_alive.contains(owner))
                owner_alive[owner] = wait_for_verdict(owner);
        }
        std::vector<std::string> dead;
        for (const auto& [owner, alive] : owner_alive)
            if (!alive) dead.push_back(owner);
        if (!dead.empty()) read_confirmed_batches(dead);
        for (std::size_t n = 0; n < firsts.size(); ++n) {
            if (verdicts[n] != detail::MetFirstCopy::ask_owner) continue;
            auto owner = std::string(firsts[n].owner);
            verdicts[n] = firsts[n].batch <= m_confirmed_batches[owner] || owner_alive[owner]
                              ? detail::MetFirstCopy::repeat
                              : detail::MetFirstCopy::claim_anew;
        }
    }

    // The last batch each owner confirmed, read again for owners whose
    // first copies are past what this process knew.
    void read_confirmed_batches(const std::vector<std::string>& owners) {
        std::vector<RoutedCommand> reads;
        reads.reserve(owners.size());
        for (const auto& owner : owners) {
            auto key = detail::confirmed_key(owner);
            reads.push_back({{"GET", key}, key});
        }
        auto replies = m_redis.pipeline(reads);
        for (std::size_t i = 0; i < owners.size(); ++i) {
            std::uint64_t batch = 0;
            if (replies[i]->type == REDIS_REPLY_STRING)
                std::from_chars(replies[i]->str, replies[i]->str + replies[i]->len, batch);
            auto& known = m_confirmed_batches[owners[i]];
            known = std::max(known, batch);
        }
    }

    // This record is the first copy: its batch now holds a claim to confirm.
    void claimed(const FingerprintClaim& claim, FingerprintResult& result) {
        result = FingerprintResult{};
        result.first = true;
        result.seen_count = 1;
        result.first_seen = claim.event_time;
        result.first_source = std::string(claim.source);
        result.first_line = claim.line;
        m_batch_claimed = true;
        m_confirmed_until_ms = std::max(m_confirmed_until_ms, expiry_ms(claim));
    }

    static long long expiry_ms(const FingerprintClaim& claim) {
        return std::chrono::duration_cast<std::chrono::milliseconds>(
                   claim.expires_at.time_since_epoch())
            .count();
    }

    // Turns the fingerprints an earlier idem kept as hashes into the strings
    // claims read now.
    void convert_earlier_layout(const std::vector<std::string>& keys,
                                const std::vector<std::size_t>& indexes) {
        load_script(m_convert_script, k_convert_lua);
        std::vector<RoutedCommand> batch;
        for (auto i : indexes)
            batch.push_back({{"EVALSHA", m_convert_script, "1", keys[i]}, keys[i]});
        auto replies = m_redis.pipeline(batch);
        for (std::size_t n = 0; n < indexes.size(); ++n)
            if (replies[n]->type != REDIS_REPLY_INTEGER || replies[n]->integer != 1)
                throw StoreError(fmt::format("store {}: key {} is not a fingerprint idem keeps",
                                             m_location.describe(), keys[indexes[n]]));
    }

    // A first copy as a string, or as the hash an earlier idem kept, the
    // list its repeats are kept in and the count of those the list dropped.
    bool read_first_copy(const std::string& key, const redisReply* reply, FingerprintRecord& record,
                         std::string& evidence, std::string& not_kept) {
        if (reply->type == REDIS_REPLY_STRING) {
            auto first = detail::decode_first_copy(std::string_view(reply->str, reply->len));
            if (!first) return false;
            record.event_time = Timestamp(Duration(first->first_seen_us));
            record.source = std::string(first->source);
            record.line = first->line;
            evidence = detail::evidence_key(key, *first);
            not_kept = detail::not_kept_key(key, *first);
            return true;
        }
        if (!detail::error_starts(reply, "WRONGTYPE")) return false;
        auto fields = m_redis.command({"HMGET", key, "first_seen", "source", "line"}, key);
        if (fields->type != REDIS_REPLY_ARRAY || fields->elements != 3 ||
            fields->element[0]->type != REDIS_REPLY_STRING)
            return false;
        record.event_time = Timestamp(Duration(integer_of(fields->element[0])));
        record.source = string_of(fields->element[1]);
        record.line = static_cast<std::uint64_t>(integer_of(fields->element[2]));
        detail::FirstCopy confirmed;
        confirmed.owner = detail::k_no_owner;
        evidence = detail::evidence_key(key, confirmed);
        not_kept = detail::not_kept_key(key, confirmed);
        return true;
    }

    [[nodiscard]] StoreError unexpected_reply(std::string_view to, const redisReply* reply) const {
        // SET ... NX GET came with Redis 7.0; an older server calls it a
        // syntax error.
        if (detail::error_starts(reply, "ERR syntax error"))
            return StoreError(fmt::format("store {}: Redis 7.0 or later is needed (SET NX GET)",
                                          m_location.describe()));
        return StoreError(
            fmt::format("store {}: unexpected reply to {}{}", m_location.describe(), to,
                        reply->type == REDIS_REPLY_ERROR
                            ? fmt::format(": {}", std::string_view(reply->str, reply->len))
                            : std::string()));
    }

    // Whether the owner of a claim met is alive: its heartbeat changes, or
    // stays silent long enough to mean it died. Waits at most about
    // k_silence_is_death, once per owner this process meets.
    bool wait_for_verdict(const std::string& owner) {
        for (;;) {
            auto key = detail::heartbeat_key(owner);
            auto reply = m_redis.command({"GET", key}, key);
            std::optional<std::string> beat;
            if (reply->type == REDIS_REPLY_STRING) beat = string_of(reply.get());
            switch (m_liveness.judge(owner, beat, detail::LivenessClock::now())) {
            case detail::OwnerLiveness::Verdict::alive:
                return true;
            case detail::OwnerLiveness::Verdict::dead:
                return false;
            case detail::OwnerLiveness::Verdict::unsure:
                std::this_thread::sleep_for(detail::k_beat_interval / 5);
            }
        }
    }

    // Loads a script once per connection; its SHA1 is kept in `sha`.
    const std::string& load_script(std::string& sha, const char* source) {
        if (sha.empty()) sha = m_redis.load_script(source);
        return sha;
    }

    // What commit() writes, in one MULTI/EXEC: a checkpoint before the
    // claims it covers are confirmed, reorder's progress with its held records.
    void apply_pending() {
        if (m_pending.empty()) return;
        // Every pending command names its key first; a cluster applies one
        // transaction per slot (docs/stores.md).
        std::vector<RoutedCommand> commands;
        commands.reserve(m_pending.size());
        for (auto& arguments : m_pending) {
            auto key = arguments.at(1);
            commands.push_back({std::move(arguments), std::move(key)});
        }
        m_pending.clear();
        m_redis.transact(commands);
    }

    static std::string entities_key(std::string_view scope) {
        return fmt::format("idem:states:{{{}}}", scope);
    }

    static std::string windows_key(std::string_view name) {
        return fmt::format("idem:merge:{{{}}}", name);
    }

    static std::string checkpoint_key(std::string_view name) {
        return fmt::format("idem:checkpoint:{}", name);
    }

    static long long integer_of(const redisReply* reply) {
        if (reply->type == REDIS_REPLY_INTEGER) return reply->integer;
        long long value = 0;
        if (reply->type == REDIS_REPLY_STRING)
            std::from_chars(reply->str, reply->str + reply->len, value);
        return value;
    }

    static std::string string_of(const redisReply* reply) {
        return reply->type == REDIS_REPLY_STRING ? std::string(reply->str, reply->len)
                                                 : std::string();
    }

    StoreLocation m_location;
    detail::RedisRouter m_redis;
    std::string m_take_script; // SHA1 of the loaded script
    std::string m_bound_script;
    std::string m_convert_script;
    std::string m_nonce_script;
    std::string m_replay_claim_script;
    std::string m_replay_renew_script;
    std::vector<std::vector<std::string>> m_pending; // written by commit()
    std::string m_owner = new_owner_id();            // of this process's claims
    std::uint64_t m_batch = 1;                       // this process's batch, confirmed by commit()
    bool m_batch_claimed = false;                    // it claimed a first copy
    long long m_confirmed_until_ms = 0;              // the latest expiry of those claimed
    // The last batch each owner met had confirmed, as far as this process read.
    std::unordered_map<std::string, std::uint64_t> m_confirmed_batches;
    std::unique_ptr<detail::Heartbeat> m_heartbeat; // from the first claim on
    detail::OwnerLiveness m_liveness;               // of the owners met
};

} // namespace

void set_redis_credentials(std::string user, std::string password) {
    detail::set_redis_credentials({std::move(user), std::move(password)});
}

void set_store_timeout(Duration timeout) {
    detail::set_store_timeout(timeout);
}

namespace detail {

std::unique_ptr<Store> open_redis_store(const StoreLocation& location) {
    return std::make_unique<RedisStore>(location);
}

} // namespace detail

} // namespace idem::store
