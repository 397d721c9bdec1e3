#pragma once
// Internal to the Redis store: the copies `dedup --keep last -o FILE`
// holds, one hash per run (its checkpoint name), the id as the field.

#include "idem/store/held_copies.hpp"
#include "idem/store/redis/redis_reorder.hpp"
#include "idem/store/redis/redis_session.hpp"
#include "idem/store/sequencer_state.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::store::detail {

// "idem:dedup-held:{name}"
[[nodiscard]] std::string held_copies_key(std::string_view name);

// "line event_time_us source_length\n" + 16 fingerprint bytes + source +
// record bytes.
[[nodiscard]] std::string encode_held_copy(const HeldCopyRow& row);
[[nodiscard]] std::optional<HeldCopyRow> decode_held_copy(const std::string& id,
                                                          std::string_view text);

// Before there was a role for them, held copies were reorder rows under the
// scope "dedup held <name>", "<hex fingerprint> <source>" as the partition
// and the line as key.secondary: read as such, so a run killed by an older
// idem resumes.
[[nodiscard]] std::string legacy_held_copies_scope(std::string_view name);
[[nodiscard]] std::optional<HeldCopyRow> held_copy_of_legacy(const HeldRecordRow& row);

// dedup --keep last's role: the copies held for a run. A copy an older idem
// held sits in reorder's layout, read beside these and dropped with them.
class RedisHeldCopies {
public:
    RedisHeldCopies(RedisSession& session, RedisReorderState& legacy)
        : m_session(session), m_legacy(legacy) {}

    std::vector<HeldCopyRow> load(std::string_view name);
    // Queued, and applied in one MULTI/EXEC by the store's commit(). A copy
    // of the legacy layout is saved anew when it is saved again.
    void save(std::string_view name, const HeldCopyChanges& changes);
    void clear(std::string_view name);

private:
    [[nodiscard]] StoreError damaged() const;

    RedisSession& m_session;
    RedisReorderState& m_legacy;
};

} // namespace idem::store::detail
