#pragma once
// Internal to the Redis store: reorder's state per scope, two hashes (the
// partitions' progress, the held records) under one hash tag.

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

} // namespace idem::store::detail
