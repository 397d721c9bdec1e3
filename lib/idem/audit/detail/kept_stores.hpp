#pragma once
// Internal to audit: what other commands kept in a store, read beside the
// records (docs/audit.md): replay's ledger (--replay-ledger), verify's
// verdicts (--verdicts) and dedup's evidence (--store). A store named
// :memory: keeps nothing between runs and is refused.

#include "idem/audit/report.hpp"
#include "idem/audit/run.hpp"
#include "idem/io/diagnostics.hpp"
#include "idem/run/rows.hpp"

namespace idem::audit::detail {

// What replay kept per key, by the key as reports show it; empty without
// --replay-ledger.
[[nodiscard]] ReplayLedger read_replay_ledger(const AuditRunOptions& options,
                                              io::Diagnostics& diagnostics);

// What verify kept, by "file:line" as the report names records; empty
// without --verdicts.
[[nodiscard]] KeptVerdicts read_verdicts(const AuditRunOptions& options,
                                         io::Diagnostics& diagnostics);

// Every copy dedup recorded under --scope, first copies and repeats, each
// handed to `take_row` as a record {fingerprint, time, source}.
void read_dedup_evidence(const AuditRunOptions& options, io::Diagnostics& diagnostics,
                         const run::RowHandler& take_row);

} // namespace idem::audit::detail
