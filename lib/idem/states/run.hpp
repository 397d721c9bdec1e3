#pragma once
// idem states over a stream of records (docs/states.md).

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/record/field_path.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rejects.hpp"
#include "idem/states/checker.hpp"
#include "idem/states/machine.hpp"
#include "idem/util/render.hpp"
#include "idem/util/time.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace idem::states {

// What puts an entity's events in order before they are judged.
enum class OrderBy {
    arrival, // as they came
    version, // --version-field or --seq: integers, gaps are findings
    time,    // --order-time: RFC 3339 or epoch times, under --max-lateness
    hlc,     // --hlc-field: <physical>.<logical> stamps, under --max-lateness
};

enum class ReportFormat { none, table, json, markdown, html, dot, mermaid };

struct StatesRunOptions {
    run::InputOptions input;
    std::string reject_path;
    run::Strictness strictness = run::Strictness::lenient;
    Machine machine;
    bool learn = false; // print the machine the log shows instead
    record::FieldPath entity_field;
    record::FieldPath state_field;
    std::optional<record::FieldPath> operation_field; // --event
    OrderBy order_by = OrderBy::arrival;
    std::optional<record::FieldPath> order_field;
    std::int64_t first_version = 1; // where an entity the store does not know starts
    std::size_t window = 100;       // events held per entity while a version is missing
    Duration max_lateness{0};       // how long (event time) a missing event is waited for
    std::optional<record::FieldPath> time_field; // event time (stuck); default received_at
    std::optional<Duration> stuck_after;
    // Output: records annotated (and --invalid FILE for violations), or a report.
    std::string output_path;
    std::string invalid_path;
    ReportFormat report = ReportFormat::none;
    std::size_t worst = 10; // entities the report shows with their findings
    // The table's lines are cut to this many display columns (the
    // terminal's width); k_never_cut into files and pipes, and with --wide.
    std::size_t table_width = k_never_cut;
    std::string store_uri = "idem.db";
    std::string scope = "default";
    Duration lock_timeout = std::chrono::seconds(60);
    std::size_t threads = 0;
    std::uint64_t batch = 1'000'000;
};

struct StatesResult {
    io::Summary summary;
    std::array<std::uint64_t, k_finding_kinds> findings{};
};

// Throws InputError, StoreError, FileSystemError.
StatesResult run_states(const StatesRunOptions& options, io::Sink& standard_output,
                        io::Diagnostics& diagnostics);

} // namespace idem::states
