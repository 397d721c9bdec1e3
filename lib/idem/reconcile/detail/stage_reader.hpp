#pragma once
// Internal to reconcile: reading a stage's records — NDJSON and HAR on the
// record run's threads, CSV, SQLite rows and JSON documents row by row —
// into (key, time, payload, bytes, by), with one reject file and one path
// census across the stages.

#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/io/summary.hpp"
#include "idem/reconcile/run.hpp"
#include "idem/record/path_census.hpp"
#include "idem/run/rejects.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace idem::reconcile::detail {

// Calls `take(key, time, payload, bytes, record)` for each record of the
// stage; sets aside the others.
using Take =
    std::function<void(std::string_view key, std::optional<Timestamp> time, std::uint64_t payload,
                       std::string_view bytes, std::string_view by)>;
// Asks the CPU for what taking a key of this hash (KeyIndex::hash_of) will
// read: `near` false some records ahead (its slot in an index), true a few
// ahead (what the slot points to).
using PrefetchKey = std::function<void(std::uint64_t hash, bool near)>;

class StageReader {
public:
    // One reject file for every stage, opened before the first is read and
    // kept until the run ends.
    // `judge` false: a second pass over stages already judged (--missing),
    // whose paths the census does not count again.
    StageReader(const ReconcileRunOptions& options, io::Diagnostics& diagnostics, bool judge = true)
        : m_options(options), m_diagnostics(diagnostics),
          m_reject_sink(io::Sink::create_file_if_named(options.reject_path)), m_judge(judge) {}

    std::uint64_t rejected() const { return m_rejected; }
    // What the census found over every stage (PathCensus::report).
    [[nodiscard]] const io::Summary& census() const { return m_census_counts; }

    // `read(rejects)` sets aside into the same reject file what it reads
    // outside a stage (--traces); its rejects count in rejected().
    template <typename Read> auto read_other(Read read) {
        run::RejectRouter rejects(m_reject_sink.get(), m_options.strictness, m_diagnostics,
                                  m_options.input.max_record_bytes);
        auto count = [&] { m_rejected += rejects.count(); };
        try {
            auto result = read(rejects);
            count();
            return result;
        } catch (...) {
            count();
            throw;
        }
    }

    // Every record of the stage to `take`. A stage that had records but
    // none usable (every one rejected: a key path that is not there, times
    // that do not read) throws InputError naming it: judged, it would be
    // every key lost, and --missing a list of events that were not.
    void read(const StageInput& stage, const Take& take);
    // From now on, records of a file are announced to `prefetch` ahead of
    // `take`, their key hashed on a worker thread.
    void prefetch_keys_with(PrefetchKey prefetch) { m_prefetch = std::move(prefetch); }

    void flush() {
        if (m_reject_sink) m_reject_sink->flush();
    }

private:
    void read_lines(const StageInput& stage, const Take& take);
    // A query's rows, each as a record.
    void read_query_rows(const StageInput& stage, const Take& take);

    const ReconcileRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<io::Sink> m_reject_sink;
    PrefetchKey m_prefetch;
    std::uint64_t m_rejected = 0;
    bool m_judge;
    record::PathCensus* m_census = nullptr; // the stage being read's
    std::string m_first_problem;            // why its first record was rejected
    io::Summary m_census_counts;
};

} // namespace idem::reconcile::detail
