#pragma once
// Internal to audit: what "the same payload" compares (run.cpp hashes it
// per record), and the payloads of a few records read again, whole, for
// the report's path-level differences (differences.hpp).

#include "idem/audit/differences.hpp"
#include "idem/audit/per_delivery.hpp"
#include "idem/audit/report.hpp"
#include "idem/audit/run.hpp"
#include "idem/io/diagnostics.hpp"
#include "idem/record/key.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <map>
#include <set>
#include <string>

namespace idem::audit::detail {

// The fields a payload is compared on: --payload's, or every field but the
// key, time, source, status, route, attempt counters, the volatile fields
// (record/volatile_fields.hpp, and --volatile) and `row_identity`.
[[nodiscard]] record::KeySpec payload_spec(const AuditRunOptions& options,
                                           const std::vector<record::FieldPath>& row_identity = {});

// A query's primary-key columns as field paths: they tell rows apart and
// say nothing of the event.
[[nodiscard]] std::vector<record::FieldPath> row_identity_of(const AuditRunOptions& options);

// The payloads, as payload_spec() compares them, of the records at
// `positions` ("events.ndjson:12", "service.db:row 3"), read again from
// their files, CSV files and query, and standard input's copy
// (run/stdin_copy.hpp). Standard input without one cannot be read twice:
// `unread` then says so, and its records are missing from the answer.
[[nodiscard]] std::map<std::string, nlohmann::json>
read_payloads_again(const AuditRunOptions& options, const std::set<std::string>& positions,
                    std::string& unread);
// The same, each payload handed to `visit` as it is read, none kept.
void visit_payloads_again(
    const AuditRunOptions& options, const std::set<std::string>& positions, std::string& unread,
    const std::function<void(const std::string&, const nlohmann::json&)>& visit);
// The payload digests (as reading computes them: run.cpp compares
// those) of the records at `positions`, read again with `also_ignored`
// left out too, each handed to `visit`: no JSON document is built.
void visit_payload_digests_again(
    const AuditRunOptions& options, const std::set<std::string>& positions,
    const std::vector<record::FieldPath>& also_ignored, std::string& unread,
    const std::function<void(const std::string&, std::uint64_t)>& visit);

// The fields that differ between the payloads of each group that mixes
// them, into `differences`: its first record against the first record of
// each other payload (up to three), read again from the files; bounded to
// the first 10,000 such groups. A warning when some could not be read.
// Fields learned as per-delivery are not shown; the payloads learning read
// are taken from `per_delivery` instead of being read again.
void compare_payloads(const AuditRunOptions& options, PerDelivery& per_delivery, GroupShelf& groups,
                      PayloadDifferences& differences, io::Diagnostics& diagnostics);

} // namespace idem::audit::detail
