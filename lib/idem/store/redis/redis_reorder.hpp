#pragma once
// Internal to the Redis store: reorder's state per scope, two hashes (the
// partitions' progress, the held records) under one hash tag.

#include "idem/store/redis/redis_session.hpp"
#include "idem/store/sequencer_state.hpp"

#include <optional>
#include <string>
#include <string_view>

namespace idem::store::detail {

// "idem:reorder:{scope}:what": the hash tag keeps a scope's two hashes in
// one Redis Cluster slot, as a MULTI touching both must.
[[nodiscard]] std::string reorder_key(std::string_view scope, std::string_view what);

// "started next.primary next.secondary highest.primary highest.secondary"
[[nodiscard]] std::string encode_progress(const PartitionProgress& progress);
[[nodiscard]] std::optional<PartitionProgress> decode_progress(const std::string& partition,
                                                               std::string_view text);

// "key_primary key_secondary arrival_us partition_length\n" + partition +
// record bytes; the id is the hash field.
[[nodiscard]] std::string encode_held(const HeldRecordRow& row);
[[nodiscard]] std::optional<HeldRecordRow> decode_held(const std::string& id,
                                                       std::string_view text);

// Reorder's role: the partitions' progress and the records held back.
class RedisReorderState {
public:
    explicit RedisReorderState(RedisSession& session) : m_session(session) {}

    std::vector<std::optional<PartitionProgress>>
    load_partitions(std::string_view scope, const std::vector<std::string>& partitions);
    std::vector<HeldRecordRow> load_held(std::string_view scope);
    // Queued, and applied in one MULTI/EXEC by the store's commit().
    void save(std::string_view scope, const ReorderChanges& changes);
    void clear(std::string_view scope);

private:
    RedisSession& m_session;
};

} // namespace idem::store::detail
