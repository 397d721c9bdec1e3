// Choosing a backend, and asking it for a role.

#include "idem/store/detail/backends.hpp"

#include "idem/util/errors.hpp"

#include <fmt/format.h>

namespace idem::store {

namespace {

template <typename Role> Role& require(Role* role, const Store& store, std::string_view what) {
    if (role == nullptr)
        throw StoreError(fmt::format("store {} does not keep {}", store.describe(), what));
    return *role;
}

} // namespace

FingerprintStore& Store::fingerprints() {
    return require(fingerprint_role(), *this, "fingerprints");
}
EvidenceStore& Store::evidence() {
    return require(evidence_role(), *this,
                   "evidence between runs: give the SQLite file or Redis store dedup wrote to");
}
NonceStore& Store::nonces() {
    return require(nonce_role(), *this, "nonces");
}
CheckpointStore& Store::checkpoints() {
    return require(checkpoint_role(), *this, "checkpoints");
}
SequencerStore& Store::sequencer() {
    return require(sequencer_role(), *this, "reorder state");
}
HeldCopyStore& Store::held_copies() {
    return require(held_copy_role(), *this, "held copies");
}
ReplayLedgerStore& Store::replay_ledger() {
    return require(replay_ledger_role(), *this, "a replay ledger");
}
VerdictStore& Store::verdicts() {
    return require(verdict_role(), *this, "verdicts");
}

WindowStore& Store::open_windows() {
    return require(window_role(), *this, "open windows");
}

EntityStore& Store::entity_states() {
    return require(entity_role(), *this, "entity states");
}

std::unique_ptr<Store> open_store(const StoreLocation& location) {
    switch (location.kind) {
    case StoreKind::redis:
        return detail::open_redis_store(location);
    case StoreKind::memory:
        return detail::open_memory_store();
    case StoreKind::sqlite:
        break;
    }
    return detail::open_sqlite_store(location);
}

} // namespace idem::store
