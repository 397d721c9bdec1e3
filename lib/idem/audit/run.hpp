#pragma once
// `idem audit` over a stream of records (docs/audit.md): read each record's
// idempotency key, business fingerprint, time, source and payload; group;
// explain every group of more than one record; render the report. Called by
// the CLI with everything already decided.

#include "idem/audit/report.hpp"
#include "idem/audit/what_if.hpp"
#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/record/field_path.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace idem::audit {

struct AuditRunOptions {
    run::InputOptions input;
    // NDJSON (or HAR) inputs are read unless only CSV files or a query are
    // given.
    bool read_records = true;
    std::vector<std::string> csv_paths;
    std::string sqlite_path; // with sqlite_query: rows of any SQLite database
    std::string sqlite_query;
    // dedup's evidence in an idem store: each copy it recorded, as a record
    // {"fingerprint","time","source"} named by its file and line.
    std::string store_uri;
    std::string store_scope = "default";
    // replay's ledger in the store it used, under its scope: each key group
    // whose key replay sent is shown with what the ledger kept.
    std::string replay_ledger_uri;
    std::string replay_scope;
    // The store `verify --keep-verdicts` used: each record it checked is
    // shown with its verdict, found by file and line.
    std::string verdicts_uri;
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    std::vector<record::FieldPath> key_fields;         // --key
    std::vector<record::FieldPath> fingerprint_fields; // --fingerprint
    std::optional<record::FieldPath> time_field;       // default: an envelope's received_at
    std::optional<record::FieldPath> source_field;
    // What the receiver answered each record: a status (a number, or a
    // number in a string; "timeout" for none). Default: in a capture,
    // `_idem.listen.status` and `_idem.listen.dropped`.
    std::optional<record::FieldPath> status_field;
    // Whose retries these are, when the records do not say by their
    // headers (plain events): --provider.
    Provider provider = Provider::unknown;
    // Where each copy was delivered (--route-field: an endpoint, a
    // subscription or webhook id), beside a capture's host and path.
    std::optional<record::FieldPath> route_field;
    // Nested retry layers' attempt counters, outermost first (--attempt-field).
    std::vector<record::FieldPath> attempt_fields;
    // What counts as "the same payload": these fields, or (empty) the
    // canonical record minus key, time, source and `ignore_fields`.
    std::vector<record::FieldPath> payload_fields;
    std::vector<record::FieldPath> ignore_fields;
    // More fields that differ between deliveries of one request
    // (--volatile), beside record/volatile_fields.hpp's: never payload.
    std::vector<record::FieldPath> volatile_fields;
    // Fields learned from the log as the delivery's (per_delivery.hpp);
    // --no-learn-volatile: none.
    bool learn_per_delivery = true;
    ExplainOptions explain;
    ReportFormat format = ReportFormat::table;
    // The table's lines are cut to this many display columns (the
    // terminal's width); k_never_cut into files and pipes, and with --wide.
    std::size_t table_width = k_never_cut;
    std::size_t threads = 0;
    // Past this many records, records go to partition files in
    // spill_directory and groups are found one partition at a time
    // (spill.hpp): memory then holds the records in groups, not the input.
    std::uint64_t spill_after = 250'000;
    std::filesystem::path spill_directory;
    // --what-if ttl=... and --suggest (what_if.hpp).
    WhatIfOptions what_if;
    // --what-if key=PATHS: the paths of each alternative key (names in
    // what_if.keys).
    std::vector<std::vector<record::FieldPath>> what_if_key_fields;
};

struct AuditResult {
    io::Summary summary;
    std::map<Cause, std::uint64_t> causes; // groups per cause
    std::uint64_t groups = 0;
};

// Writes the report to `output`. Throws InputError, UsageError.
AuditResult run_audit(const AuditRunOptions& options, io::Sink& output,
                      io::Diagnostics& diagnostics);

} // namespace idem::audit
