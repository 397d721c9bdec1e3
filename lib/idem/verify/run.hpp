#pragma once
// `idem verify` and `idem sign` over a stream of records: read, parse, judge,
// write, route, count. Called by the CLI with everything already decided.

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/verify/config.hpp"

#include <optional>
#include <string>

namespace idem::verify {

enum class StoreFailure { fail, local };

enum class InvalidRouting { keep_in_output, divert };
enum class NonceCheck { off, on };

struct VerifyRunOptions {
    run::InputOptions input;
    VerifyConfig config;
    std::optional<Timestamp> now; // default: each envelope's received_at, else the clock
    InvalidRouting invalid_routing = InvalidRouting::keep_in_output;
    std::string invalid_path; // with divert: where invalid records go ("" = counted and dropped)
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    NonceCheck nonce = NonceCheck::off;
    // How far apart, in received_at, two deliveries of one message id are
    // still a replay. Long: GitHub's "Redeliver" works for three days, and
    // its signatures carry no time for a tolerance to bound.
    Duration nonce_window = std::chrono::hours(72);
    // Each record's verdict kept in the store, by source and line, for
    // `audit --verdicts` (scope store::k_verdict_scope).
    bool keep_verdicts = false;
    std::string store_uri;
    // What a failing store does to the run: ends it (exit 4), or (local)
    // replays are judged within this run from there on, marked, counted
    // under `degraded`, and written back to the store at the end.
    StoreFailure on_store_error = StoreFailure::fail;
    std::size_t threads = 0; // worker threads; 0: one per core (at most 8)
    // --explain: each invalid verdict gets a diagnosis (explain.hpp), at
    // most this many verifications of changed copies each.
    bool explain = false;
    std::size_t explain_budget = 64;
};

struct RunResult {
    io::Summary summary;
    std::uint64_t findings = 0; // invalid records
};

// Throws InputError (unreadable input, or bad input under --strict),
// StoreError, FileSystemError, UsageError.
RunResult run_verify(const VerifyRunOptions& options, io::Sink& output,
                     io::Diagnostics& diagnostics);

struct SignRunOptions {
    run::InputOptions input;
    VerifyConfig config;
    std::optional<Timestamp> timestamp; // default: the clock, per record
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
};

RunResult run_sign(const SignRunOptions& options, io::Sink& output, io::Diagnostics& diagnostics);

} // namespace idem::verify
