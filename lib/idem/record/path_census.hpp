#pragma once
// Every field path a run was given, checked against the records it read
// (docs/exit-codes.md, "Paths and values that match nothing"). A path no
// record holds is almost always a typo: at the end it is a warning naming
// the flag, the path and the closest path records did hold, and the run
// exits 3 unless --allow-absent names it. A value that no record holds at a
// path records do hold (--bypass priority=critical, a rule's type:
// notificaton) is a warning with the closest values seen, counted as
// unmatched_values in the summary (--fail-on unmatched: exit 1).
//
// The run frame owns one; each worker's parser reports every record it
// parses (RecordParser::report_paths_to), and only what no record has shown
// yet is looked up, so a run whose paths all turn up early pays nothing
// after its first records.

#include "idem/io/diagnostics.hpp"
#include "idem/io/summary.hpp"
#include "idem/record/field_path.hpp"

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace idem::record {

class RecordParser;

class PathCensus {
public:
    // Where a path is looked for: in the record, or (event) in the event as
    // --ignore and --payload read it, an envelope's body included.
    enum class Scope { record, event };

    explicit PathCensus(std::vector<FieldPath> allowed_absent = {});
    PathCensus(const PathCensus&) = delete;
    PathCensus& operator=(const PathCensus&) = delete;

    // Before the run. `flag` names the path in messages ("--ignore", "rule
    // 'alerts' match"); a path given twice is checked once.
    void expect_path(std::string flag, const FieldPath& path, Scope scope = Scope::record);
    // A value some record must hold at `path` (compared as FieldValue::text:
    // a string unescaped, other values in canonical JSON).
    void expect_value(std::string flag, const FieldPath& path, std::string value,
                      Scope scope = Scope::record);

    // One parsed record, on any thread.
    void observe(RecordParser& parser);

    // Whether some record held `path` (an expected one): a time field that
    // is there but never reads is "unreadable", not absent.
    [[nodiscard]] bool held(const FieldPath& path) const;
    // The path the first records held that is closest to `path` ("" when
    // none is close), for a command's own "in none of the records" message.
    [[nodiscard]] std::string closest_to(std::string_view path) const;

    struct Miss {
        std::string flag;
        std::string path;
        std::optional<std::string> value; // a value no record held (its path present)
        std::string closest;              // a path, or a value, records held; "" if none close
        std::vector<std::string> seen;    // for a value: some of the values records held
    };
    struct Verdict {
        std::uint64_t records = 0;
        std::vector<Miss> absent;    // paths no record held (and not allowed absent)
        std::vector<Miss> unmatched; // values no record held
    };
    [[nodiscard]] Verdict verdict() const;

    // Warns of every miss and adds absent_paths and unmatched_values to the
    // summary when there is one. No record read: nothing to judge.
    void report(io::Diagnostics& diagnostics, io::Summary& summary) const;

private:
    struct Expectation {
        std::string flag;
        FieldPath path;
        std::optional<FieldPath> in_body; // Scope::event on an envelope: body.<path>
        std::optional<std::string> value;
        std::atomic<bool> path_seen{false};
        std::atomic<bool> value_seen{false};
        std::vector<std::string> values; // distinct values seen, bounded; under m_mutex
    };
    Expectation* find(const FieldPath& path, const std::optional<std::string>& value);
    Expectation& add(std::string flag, const FieldPath& path, Scope scope);

    std::vector<FieldPath> m_allowed_absent;
    std::deque<Expectation> m_expectations; // a deque: atomics do not move
    std::atomic<std::size_t> m_pending{0};  // expectations not yet satisfied
    std::atomic<std::uint64_t> m_records{0};
    mutable std::mutex m_mutex;
    std::set<std::string> m_paths_seen; // of the first records, for "did you mean"
    std::uint64_t m_records_sampled = 0;
};

} // namespace idem::record
