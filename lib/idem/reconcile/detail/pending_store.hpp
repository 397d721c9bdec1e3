#pragma once
// Internal to reconcile: T+1 — the keys still pending, and those settled
// within --remember, kept in a store between runs.

#include "idem/reconcile/ledger.hpp"
#include "idem/reconcile/run.hpp"
#include "idem/store/store.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace idem::reconcile::detail {

// --- T+1: the keys still pending, kept in a store between runs ---------------
//
// Two generations under the flow's scope, in the store's open-window role
// (docs/stores.md): "reconcile SCOPE" holds what the last run left, with
// the fingerprint of that run's inputs; "reconcile SCOPE (before)" what
// that run started from. A run over the very same inputs again (yesterday's
// job re-run) starts from the earlier generation, so that its keys are not
// counted twice and its losses not reported twice.
class PendingStore {
public:
    explicit PendingStore(const ReconcileRunOptions& options);

    // The keys the last run left pending (or, over the very same inputs
    // again, those that run started from).
    std::vector<CarriedKey> load(std::size_t stages);
    void save(const std::vector<CarriedKey>& carry);

    // The keys earlier runs settled (--remember), but those these very
    // inputs settled when they were judged before.
    RememberedKeys load_settled(std::size_t stages);
    // This run's settled keys in; those settled longer than `remember`
    // before `now` (the latest event time) out.
    void save_settled(std::vector<std::tuple<std::string, std::string, std::int64_t>>& settled,
                      const RememberedKeys& remembered, std::optional<Timestamp> now,
                      Duration remember);

    [[nodiscard]] bool rerun() const { return m_rerun; }

private:
    // What names a run's inputs: each stage's file, size and modification
    // time. Standard input never matches (it is read once).
    static std::string fingerprint(const ReconcileRunOptions& options);
    static std::string inputs_of(const std::string& meta);

    std::unique_ptr<store::Store> m_store;
    std::string m_current, m_before, m_settled, m_inputs;
    std::uint64_t m_run; // this run's inputs, as settled keys name them
    bool m_rerun = false;
    std::vector<std::pair<std::string, std::string>> m_previous;
    std::string m_previous_meta;
};

} // namespace idem::reconcile::detail
