#pragma once
// A backend names the roles it plays once, as the interfaces it derives
// from: `class SqliteStore final : public PlaysRoles<FingerprintStore,
// NonceStore, ...>`. Store's role hooks answer `this` for those and null
// (the accessor's "does not keep" error) for the others.

#include "idem/store/checkpoints.hpp"
#include "idem/store/entity_states.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/held_copies.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/open_windows.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"

#include <type_traits>

namespace idem::store::detail {

template <typename... Roles> class PlaysRoles : public Store, public Roles... {
protected:
    FingerprintStore* fingerprint_role() override { return role<FingerprintStore>(); }
    EvidenceStore* evidence_role() override { return role<EvidenceStore>(); }
    NonceStore* nonce_role() override { return role<NonceStore>(); }
    CheckpointStore* checkpoint_role() override { return role<CheckpointStore>(); }
    SequencerStore* sequencer_role() override { return role<SequencerStore>(); }
    HeldCopyStore* held_copy_role() override { return role<HeldCopyStore>(); }
    ReplayLedgerStore* replay_ledger_role() override { return role<ReplayLedgerStore>(); }
    VerdictStore* verdict_role() override { return role<VerdictStore>(); }
    WindowStore* window_role() override { return role<WindowStore>(); }
    EntityStore* entity_role() override { return role<EntityStore>(); }

private:
    template <typename Role> Role* role() {
        if constexpr ((std::is_same_v<Role, Roles> || ...))
            return this;
        else
            return nullptr;
    }
};

} // namespace idem::store::detail
