#pragma once
// `idem replay`: re-send records to a target with stable idempotency keys,
// a ledger in the store, safe retries and pacing (docs/replay.md). Called
// by the CLI with everything already decided.

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/net/http_client.hpp"
#include "idem/record/field_path.hpp"
#include "idem/replay/policy.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/verify/config.hpp"

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace idem::replay {

enum class Timing { as_fast_as_allowed, original };

struct Selection {
    std::optional<Timestamp> since; // by received_at, or --time-field
    std::optional<Timestamp> until; // exclusive
    std::optional<record::FieldPath> time_field;
    std::vector<std::pair<record::FieldPath, std::string>> filters; // PATH=VALUE, all must hold
    std::optional<std::uint64_t> limit;
};

struct ReplayOptions {
    run::InputOptions input;
    run::Strictness strictness = run::Strictness::lenient;
    std::string reject_path;

    std::string to;
    std::vector<record::FieldPath> key_paths;
    std::string key_header = "Idempotency-Key";
    Selection selection;

    // How long to wait for a SQLite ledger another process holds locked.
    Duration lock_timeout = std::chrono::seconds(60);
    std::string store_uri;
    std::string scope; // the ledger's namespace; default: the --to URL
    store::ReplayRerun rerun = store::ReplayRerun::resume;
    Duration lease = std::chrono::seconds(30);

    RetryRules rules;
    Backoff backoff;
    std::uint32_t max_attempts = 5;
    double retry_budget = 0.1;
    double rate_per_second = 0; // 0: no limit
    std::size_t concurrency = 8;
    net::Timeouts timeouts;
    Timing timing = Timing::as_fast_as_allowed;
    double speed = 1;
    std::optional<verify::VerifyConfig> resign;
    bool dry_run = false;
    std::uint64_t seed = 0; // jitter; 0: from the clock
};

struct ReplayResult {
    io::Summary summary;
    std::uint64_t failed = 0;
};

// Writes one NDJSON outcome per selected record to `output` (completion
// order). Throws InputError, StoreError, NetworkError, UsageError.
ReplayResult run_replay(const ReplayOptions& options, io::Sink& output,
                        io::Diagnostics& diagnostics);

} // namespace idem::replay
