// The claim rule of the replay ledger, shared by every store.

#include "idem/store/replay_ledger.hpp"

namespace idem::store {

std::string_view replay_state_name(ReplayState state) {
    switch (state) {
    case ReplayState::in_progress:
        return "in_progress";
    case ReplayState::completed:
        return "completed";
    case ReplayState::failed:
        return "failed";
    }
    return "unknown";
}

bool may_claim_replay(const std::optional<ReplayEntry>& existing, Timestamp now,
                      ReplayRerun rerun) {
    if (!existing) return true;
    switch (existing->state) {
    case ReplayState::in_progress:
        return existing->lease_until <= now;
    case ReplayState::completed:
        return rerun == ReplayRerun::force;
    case ReplayState::failed:
        return !existing->permanent || rerun != ReplayRerun::resume;
    }
    return false;
}

} // namespace idem::store
