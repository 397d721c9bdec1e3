#pragma once
// idem reconcile: where events were lost or multiplied between stages
// (docs/reconcile.md).

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/reconcile/ledger.hpp"
#include "idem/record/field_path.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/util/render.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace idem::reconcile {

// One stage of the flow: its records and how to read their key and time.
struct StageInput {
    std::string name;
    std::string path; // NDJSON (envelopes too), .har, .csv, or a JSON array / {"data": [...]}
    // The files `path` names (a folder, a pattern: run/input_paths.hpp),
    // read in order; empty: `path` itself.
    std::vector<std::string> files;
    record::FieldPath key;
    std::optional<record::FieldPath> time; // default: an envelope's received_at
    // What `changed` compares between stages (none: not compared).
    std::vector<record::FieldPath> payload;
    std::string query; // with a SQLite database as `path`: the rows of this query
    // A stage of a trace: the spans of this name in --traces (the key is
    // the trace id, the time the span's start).
    std::string span;
    // --by: a field whose value sorts the stage's keys into groups (a
    // source, a partition), for losses per group.
    std::optional<record::FieldPath> by;
};

enum class ReportFormat { table, json, markdown, html };

struct ReconcileRunOptions {
    std::vector<StageInput> stages; // in flow order, 2 to k_max_stages
    // How every stage is read (--max-record-size, --allow-absent,
    // --csv-delimiter, --csv-types, --input-format for a stage whose name
    // does not say): its paths are the stage's.
    run::InputOptions input;
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    std::size_t threads = 0;
    Duration grace = std::chrono::minutes(15);
    std::optional<Duration> sla;
    std::size_t examples = 20;
    ReportFormat report = ReportFormat::table;
    // The table's lines are cut to this many display columns (the
    // terminal's width); k_never_cut into files and pipes, and with --wide.
    std::size_t table_width = k_never_cut;
    std::string missing_path; // lost events, from the first stage that has them
    // --filter PATH=VALUE: only lost events where every one holds go to
    // missing_path (the relevant event types); the report counts them all.
    std::vector<std::pair<record::FieldPath, std::string>> missing_filters;
    // OpenTelemetry traces (the collector's file exporter: OTLP JSON, one
    // export request per line), for stages given as span names.
    std::string traces_path;
    // T+1: a store (PATH, redis://) where keys still pending at the end are
    // kept for the next run of the same flow (`scope`), and found there.
    std::string store_uri;
    std::string scope;
    // With a store: keys settled (seen through, or lost) are remembered this
    // long after their latest event time, so a later run tells a key seen
    // again (duplicated, first processed DATE) from a new one (0: not).
    Duration remember = std::chrono::hours(24 * 7);
    Duration lock_timeout = std::chrono::seconds(60);
    // Past this many keys in memory, keys go to partition files under
    // spill_directory and are judged a partition at a time (0: never).
    std::uint64_t spill_after = 2'000'000;
    std::filesystem::path spill_directory;
};

struct ReconcileResult {
    io::Summary summary;
    Reconciliation reconciliation;
};

// Writes the report to `output`. Throws InputError, FileSystemError.
ReconcileResult run_reconcile(const ReconcileRunOptions& options, io::Sink& output,
                              io::Diagnostics& diagnostics);

void render_report(const Reconciliation& reconciliation, ReportFormat format, std::string& out);

} // namespace idem::reconcile
