#pragma once
// The store that subcommands share (docs/stores.md, docs/architecture.md):
// a SQLite file by default, ":memory:", or redis://host:port[/db]. A backend
// hands out one small interface per role it plays (fingerprints, evidence,
// nonces, checkpoints, sequencer state, held copies, the replay ledger,
// verdicts, open windows, entity states); asking for a role it does not play is a StoreError that
// says so. No SQL or Redis command appears outside this module.

#include "idem/store/location.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace idem::store {

class FingerprintStore;
class EvidenceStore;
class NonceStore;
class CheckpointStore;
class SequencerStore;
class HeldCopyStore;
class ReplayLedgerStore;
class VerdictStore;
class WindowStore;
class EntityStore;

class Store {
public:
    virtual ~Store() = default;

    // Each role, or StoreError naming the store and the role it lacks.
    [[nodiscard]] FingerprintStore& fingerprints();
    [[nodiscard]] EvidenceStore& evidence();
    [[nodiscard]] NonceStore& nonces();
    [[nodiscard]] CheckpointStore& checkpoints();
    [[nodiscard]] SequencerStore& sequencer();
    [[nodiscard]] HeldCopyStore& held_copies();
    [[nodiscard]] ReplayLedgerStore& replay_ledger();
    [[nodiscard]] VerdictStore& verdicts();
    [[nodiscard]] WindowStore& open_windows();
    [[nodiscard]] EntityStore& entity_states();

    // Makes everything every role saved so far durable, in one transaction
    // per store (per slot on a Redis Cluster). Throws StoreError.
    virtual void commit() = 0;

    // Deletes expired fingerprints and nonces; returns how many. Stores
    // that expire entries themselves (Redis) have none to delete.
    virtual std::uint64_t collect_garbage(Timestamp now) {
        (void)now;
        return 0;
    }

    [[nodiscard]] virtual std::string describe() const = 0;

protected:
    // A backend overrides the ones it plays.
    virtual FingerprintStore* fingerprint_role() { return nullptr; }
    virtual EvidenceStore* evidence_role() { return nullptr; }
    virtual NonceStore* nonce_role() { return nullptr; }
    virtual CheckpointStore* checkpoint_role() { return nullptr; }
    virtual SequencerStore* sequencer_role() { return nullptr; }
    virtual HeldCopyStore* held_copy_role() { return nullptr; }
    virtual ReplayLedgerStore* replay_ledger_role() { return nullptr; }
    virtual VerdictStore* verdict_role() { return nullptr; }
    virtual WindowStore* window_role() { return nullptr; }
    virtual EntityStore* entity_role() { return nullptr; }
};

// Opens (and creates or migrates) the store. Throws StoreError naming it.
[[nodiscard]] std::unique_ptr<Store> open_store(const StoreLocation& location);

} // namespace idem::store
