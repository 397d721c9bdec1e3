#include "idem/store/checkpoints.hpp"
#include "idem/store/detail/backends.hpp"
#include "idem/store/detail/plays_roles.hpp"
#include "idem/store/detail/redis_cluster.hpp"
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

// How long a first copy's claim lives before its batch is committed.
constexpr std::chrono::milliseconds k_lease{60'000};

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
        auto reply =
            m_redis.command({"EVALSHA", sha, "1", key,
                             std::to_string(sighting.received_at.time_since_epoch().count()),
                             std::string(sighting.source), std::to_string(sighting.line),
                             std::to_string(window.count()), std::to_string(keep_ms)},
                            key);
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
    // read, so a batch costs one round trip, not one per record. A claim
    // that meets another process's unconfirmed lease is asked again once
    // that owner is known to be alive (a repeat) or dead (taken over).
    std::vector<FingerprintResult> claim_fingerprints(std::string_view scope,
                                                      const std::vector<FingerprintClaim>& claims,
                                                      Timestamp now) override {
        (void)now; // Redis expires keys itself
        std::vector<FingerprintResult> results(claims.size());
        if (claims.empty()) return results;
        load_claim_script();
        if (!m_heartbeat)
            m_heartbeat = std::make_unique<detail::Heartbeat>(
                seeds_of(m_location), m_location.database, m_location.describe(), m_owner);
        std::vector<std::string> keys;
        std::vector<std::size_t> asking;
        std::vector<RoutedCommand> batch;
        for (std::size_t i = 0; i < claims.size(); ++i) {
            keys.push_back(fingerprint_key(scope, claims[i].fingerprint));
            batch.push_back(claim_command(keys[i], claims[i], "ask", {}));
            asking.push_back(i);
        }
        std::vector<std::string> owners(claims.size()); // of the leases met
        while (!asking.empty()) {
            auto replies = m_redis.pipeline(batch);
            batch.clear();
            std::vector<std::size_t> met;
            for (std::size_t n = 0; n < asking.size(); ++n)
                if (!read_claim(replies[n], results[asking[n]], owners[asking[n]]))
                    met.push_back(asking[n]);
            for (auto i : asking)
                if (results[i].first && owners[i].empty()) confirm_later(keys[i], claims[i]);
            std::map<std::string, bool> owner_alive;
            for (auto i : met)
                if (!owner_alive.contains(owners[i]))
                    owner_alive[owners[i]] = wait_for_verdict(owners[i]);
            for (auto i : met)
                batch.push_back(claim_command(
                    keys[i], claims[i], owner_alive[owners[i]] ? "count" : "take", owners[i]));
            // A taken lease someone else took first is met again, with its new owner.
            asking = std::move(met);
        }
        return results;
    }

    // Not in one transaction with the claims (Redis has none across a
    // pipeline): see docs/dedup.md on what a crash can do with Redis.
    void release_fingerprint(std::string_view scope, const FingerprintBytes& fingerprint,
                             Timestamp) override {
        auto key = fingerprint_key(scope, fingerprint);
        std::erase_if(m_unconfirmed, [&](const auto& claim) { return claim.first == key; });
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
        m_pending.push_back({"DEL", checkpoint_key(name)});
        m_pending.push_back(std::move(arguments));
    }

    void clear_checkpoint(std::string_view name) override {
        m_pending.push_back({"DEL", checkpoint_key(name)});
    }

    // SCAN for the scope's fingerprints (one hash slot each), then each
    // one's first copy and its evidence list, pipelined per page.
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
                    reads.push_back(
                        {{"HMGET", keys.back(), "first_seen", "source", "line"}, keys.back()});
                    reads.push_back(
                        {{"LRANGE", evidence_key(keys.back()), "0", "-1"}, keys.back()});
                }
                auto replies = m_redis.pipeline(reads);
                for (std::size_t k = 0; k < keys.size(); ++k) {
                    const auto& first = replies[2 * k];
                    const auto& repeats = replies[2 * k + 1];
                    FingerprintRecord record;
                    if (!fingerprint_of(keys[k], record.fingerprint) || first->elements != 3 ||
                        first->element[0]->type != REDIS_REPLY_STRING)
                        continue; // expired between SCAN and HMGET
                    record.event_time = Timestamp(Duration(integer_of(first->element[0])));
                    record.source = string_of(first->element[1]);
                    record.line = static_cast<std::uint64_t>(integer_of(first->element[2]));
                    visit(record);
                    record.first = false;
                    for (std::size_t i = 0; i < repeats->elements; ++i)
                        if (parse_evidence(string_of(repeats->element[i]), record)) visit(record);
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
        // progress under this owner, and the key would be skipped.
        auto replies = m_redis.pipeline(batch, detail::Retry::never);
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

    // A first copy's claim holds for a lease only; once its batch's output
    // is flushed, it is confirmed to the full TTL and loses its owner. A
    // process that dies in between stops beating its heartbeat, and the next
    // claim on its leases takes them over (docs/dedup.md), so a rerun emits
    // the batch again instead of losing it.
    void commit() override {
        apply_pending();
        if (m_unconfirmed.empty()) return;
        load_script(m_confirm_script, k_confirm_lua);
        std::vector<RoutedCommand> batch;
        for (const auto& [key, expires_ms] : m_unconfirmed)
            batch.push_back({{"EVALSHA", m_confirm_script, "2", key, evidence_key(key),
                              std::to_string(expires_ms), m_owner},
                             key});
        (void)m_redis.pipeline(batch);
        m_unconfirmed.clear();
    }

    std::string describe() const override { return m_location.describe(); }

private:
    [[nodiscard]] StoreError damaged_held_copy() const {
        return StoreError(fmt::format("store {}: a copy held by dedup --keep last is damaged",
                                      m_location.describe()));
    }

    // Claims one fingerprint atomically. This process's own unconfirmed
    // claim of this same record (a retry after a lost connection) answers
    // first again, never a repeat of itself. Otherwise a live entry (within the window) is
    // a repeat, counted, and kept as evidence ("source:line event_time_us")
    // in a list beside it; otherwise this record becomes the first copy, on
    // a lease owned by this process. An entry still leased by another owner
    // is answered {0, 0, owner, 0} when asking (ARGV[7] 'ask'), counted once
    // that owner is known alive ('count'), and claimed anew when it is dead
    // and still the owner (ARGV[7] 'take', ARGV[8] the dead owner).
    static constexpr const char* k_claim_lua = R"lua(
local v = redis.call('HMGET', KEYS[1], 'first_seen', 'count', 'source', 'line', 'owner')
if v[5] == ARGV[6] and v[3] == ARGV[4] and v[4] == ARGV[5] then
  return {1, tonumber(v[1]), v[3], tonumber(v[4])}
end
if v[1] and (ARGV[3] == '0' or tonumber(ARGV[1]) - tonumber(v[1]) <= tonumber(ARGV[3])) then
  local foreign = v[5] and v[5] ~= ARGV[6]
  if foreign and (ARGV[7] == 'ask' or (ARGV[7] == 'take' and v[5] ~= ARGV[8])) then
    return {0, 0, v[5], 0}
  end
  if not (foreign and ARGV[7] == 'take') then
    local c = redis.call('HINCRBY', KEYS[1], 'count', 1)
    redis.call('RPUSH', KEYS[2], ARGV[4] .. ':' .. ARGV[5] .. ' ' .. ARGV[1])
    local ttl = redis.call('PTTL', KEYS[1])
    if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
    return {c, tonumber(v[1]), v[3], tonumber(v[4])}
  end
end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'first_seen', ARGV[1], 'count', 1, 'source', ARGV[4], 'line', ARGV[5],
           'owner', ARGV[6])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return {1, tonumber(ARGV[1]), ARGV[4], tonumber(ARGV[5])}
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

    // Confirms a first copy this process still owns: the full TTL for it
    // and its evidence, and no owner any more.
    static constexpr const char* k_confirm_lua = R"lua(
if redis.call('HGET', KEYS[1], 'owner') ~= ARGV[2] then return 0 end
redis.call('HDEL', KEYS[1], 'owner')
redis.call('PEXPIREAT', KEYS[2], ARGV[1])
return redis.call('PEXPIREAT', KEYS[1], ARGV[1])
)lua";

    RoutedCommand claim_command(const std::string& key, const FingerprintClaim& claim,
                                std::string_view mode, const std::string& met_owner) {
        return {{"EVALSHA", m_claim_script, "2", key, evidence_key(key),
                 std::to_string(claim.event_time.time_since_epoch().count()),
                 std::to_string(k_lease.count()), std::to_string(claim.window.count()),
                 std::string(claim.source), std::to_string(claim.line), m_owner, std::string(mode),
                 met_owner},
                key};
    }

    // False when the claim met another owner's lease (named in `met_owner`).
    bool read_claim(const Reply& reply, FingerprintResult& result, std::string& met_owner) {
        if (reply->type != REDIS_REPLY_ARRAY || reply->elements != 4)
            throw StoreError(
                fmt::format("store {}: unexpected reply to a claim", m_location.describe()));
        auto count = integer_of(reply->element[0]);
        if (count == 0) {
            met_owner = string_of(reply->element[2]);
            return false;
        }
        met_owner.clear();
        result.seen_count = static_cast<std::uint64_t>(count);
        result.first = result.seen_count == 1;
        result.first_seen = Timestamp(Duration(integer_of(reply->element[1])));
        result.first_source = string_of(reply->element[2]);
        result.first_line = static_cast<std::uint64_t>(integer_of(reply->element[3]));
        return true;
    }

    void confirm_later(const std::string& key, const FingerprintClaim& claim) {
        auto expires_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
            claim.expires_at.time_since_epoch());
        m_unconfirmed.emplace_back(key, expires_ms.count());
    }

    // Whether the owner of a lease met is alive: its heartbeat changes, or
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

    void load_claim_script() { load_script(m_claim_script, k_claim_lua); }

    // Loads a script once per connection; its SHA1 is kept in `sha`.
    const std::string& load_script(std::string& sha, const char* source) {
        if (sha.empty()) sha = m_redis.load_script(source);
        return sha;
    }

    // The hash tag ({...}) puts a fingerprint and its evidence in one
    // Redis Cluster slot, as a script touching both must.
    static std::string fingerprint_key(std::string_view scope,
                                       const FingerprintBytes& fingerprint) {
        static constexpr char k_hex[] = "0123456789abcdef";
        std::string key = fmt::format("idem:fp:{{{}:", scope);
        for (auto byte : fingerprint) {
            key += k_hex[byte >> 4];
            key += k_hex[byte & 0xf];
        }
        key += '}';
        return key;
    }

    // The fingerprint in "idem:fp:{scope:hex}".
    static bool fingerprint_of(const std::string& key, FingerprintBytes& fingerprint) {
        auto colon = key.rfind(':');
        if (colon == std::string::npos || key.size() < colon + 1 + 2 * fingerprint.size() + 1)
            return false;
        for (std::size_t i = 0; i < fingerprint.size(); ++i) {
            unsigned value = 0;
            auto at = key.data() + colon + 1 + 2 * i;
            if (std::from_chars(at, at + 2, value, 16).ec != std::errc{}) return false;
            fingerprint[i] = static_cast<std::uint8_t>(value);
        }
        return true;
    }

    // A repeat kept as evidence: "source:line event_time_us" (the source may
    // hold colons and spaces: read from the right).
    static bool parse_evidence(const std::string& entry, FingerprintRecord& record) {
        auto space = entry.rfind(' ');
        if (space == std::string::npos) return false;
        auto colon = entry.rfind(':', space);
        if (colon == std::string::npos) return false;
        long long micros = 0;
        std::uint64_t line = 0;
        if (std::from_chars(entry.data() + space + 1, entry.data() + entry.size(), micros).ec !=
                std::errc{} ||
            std::from_chars(entry.data() + colon + 1, entry.data() + space, line).ec != std::errc{})
            return false;
        record.source = entry.substr(0, colon);
        record.line = line;
        record.event_time = Timestamp(Duration(micros));
        return true;
    }

    // "idem:fp:{scope:hex}" -> "idem:dups:{scope:hex}"
    static std::string evidence_key(const std::string& fingerprint_key) {
        return "idem:dups:" + fingerprint_key.substr(8);
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
    std::string m_claim_script; // SHA1 of the loaded claim script
    std::string m_nonce_script;
    std::string m_confirm_script;
    std::string m_replay_claim_script;
    std::string m_replay_renew_script;
    std::vector<std::pair<std::string, long long>>
        m_unconfirmed;                               // first copies of the batch: key, expiry
    std::vector<std::vector<std::string>> m_pending; // written by commit()
    std::string m_owner = new_owner_id();            // of this process's leases
    std::unique_ptr<detail::Heartbeat> m_heartbeat;  // from the first claim on
    detail::OwnerLiveness m_liveness;                // of the owners met
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
