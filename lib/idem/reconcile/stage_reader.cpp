#include "idem/reconcile/detail/stage_reader.hpp"

#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/run/record_run.hpp"
#include "idem/run/rows.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/key_index.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::reconcile::detail {

namespace {

// How a stage's file is read: a query's rows, or through the input layer
// (run/input.hpp) as every command reads a file: compressed or not, CSV
// and HAR by their names, anything else told by its first bytes (NDJSON, a
// JSON array or a page of records, CSV, HAR).
// A stage's name says its format; else --input-format does, else its bytes.
run::InputFormat input_format_of(const StageInput& stage, run::InputFormat given) {
    if (stage.path.ends_with(".csv")) return run::InputFormat::csv;
    if (stage.path.ends_with(".har")) return run::InputFormat::har;
    return given;
}

struct Extracted {
    std::string_view key;
    std::string_view by;
    std::optional<Timestamp> time;
    std::uint64_t payload = 0;
    std::string problem;
};

struct Reader {
    const StageInput& stage;

    explicit Reader(const StageInput& input) : stage(input) {}

    Extracted extract(record::RecordParser& parser) const {
        Extracted found;
        auto key = parser.find(stage.key);
        if (!key || key->text.empty()) {
            found.problem =
                fmt::format("missing key field '{}' (stage {})", stage.key.text(), stage.name);
            return found;
        }
        found.key = key->text;
        if (stage.by)
            if (auto by = parser.find(*stage.by)) found.by = by->text;
        auto time = record::event_time(parser, stage.time ? &*stage.time : nullptr);
        if (time.failed()) {
            found.problem = record::describe_failure(time, *stage.time) +
                            fmt::format(" (stage {})", stage.name);
            return found;
        }
        found.time = time.time;
        // --payload: the values compared between stages, encoded as keys
        // are (record/key.hpp) and hashed; 0 when there is nothing to compare.
        if (!stage.payload.empty()) {
            thread_local std::string encoded;
            encoded.clear();
            for (const auto& path : stage.payload) {
                encoded += ' ';
                if (auto value = parser.find(path)) record::append_encoded_value(encoded, *value);
            }
            found.payload = std::hash<std::string_view>{}(encoded) | 1;
        }
        return found;
    }
};

// --- reading a stage, record by record -------------------------------------

struct Outcome {
    enum class Kind : std::uint8_t { too_long, failed, record };
    io::BlockLine line;
    Kind kind = Kind::record;
    std::uint32_t key_at = 0, key_size = 0, by_at = 0, by_size = 0;
    std::optional<Timestamp> time;
    std::uint64_t payload = 0;
    std::uint64_t key_hash = 0; // KeyIndex::hash_of(key), for StageReader's prefetch
    std::uint64_t column = 0;
    std::string message;
};

struct BlockResult {
    HugeVector<Outcome> outcomes; // a few MiB per block: util/huge_pages.hpp
    std::uint64_t lines = 0;
    std::string keys;
    void clear() {
        outcomes.clear();
        lines = 0;
        keys.clear();
    }
};

struct WorkerState {
    record::RecordParser parser;
};

} // namespace

void StageReader::read(const StageInput& stage, const Take& take) {
    record::PathCensus census(m_options.input.allow_absent);
    auto flag = [&](std::string_view name) {
        return fmt::format("{} (stage {})", name, quote(stage.name));
    };
    census.expect_path(flag("--key"), stage.key);
    if (stage.time) census.expect_path(flag("--time"), *stage.time);
    if (stage.by) census.expect_path(flag("--by"), *stage.by);
    for (const auto& path : stage.payload)
        census.expect_path(flag("--payload"), path);
    m_census = &census;
    m_first_problem.clear();
    auto rejected_before = m_rejected;
    std::uint64_t taken = 0;
    Take counted = [&](std::string_view key, std::optional<Timestamp> time, std::uint64_t payload,
                       std::string_view bytes, std::string_view by) {
        ++taken;
        take(key, time, payload, bytes, by);
    };
    if (stage.query.empty())
        read_lines(stage, counted);
    else
        read_query_rows(stage, counted);
    m_census = nullptr;
    if (!m_judge) return;
    census.report(m_diagnostics, m_census_counts);
    auto rejected = m_rejected - rejected_before;
    if (taken == 0 && rejected > 0)
        throw InputError({stage.path, 0, 0, 0},
                         fmt::format("stage {}: none of its {} record{} is usable ({}): "
                                     "nothing is judged, and no --missing file written",
                                     quote(stage.name), rejected, rejected == 1 ? "" : "s",
                                     m_first_problem));
}

void StageReader::read_lines(const StageInput& stage, const Take& take) {
    run::InputOptions input = m_options.input;
    input.paths = stage.files.empty() ? std::vector<std::string>{stage.path} : stage.files;
    input.format = input_format_of(stage, m_options.input.format);
    run::RecordRunSetup setup{input, m_reject_sink.get(), m_options.strictness, m_options.threads};
    run::RecordRun<WorkerState, BlockResult> run(setup, m_diagnostics);
    Reader reader(stage);
    auto states = run.states([] { return std::make_unique<WorkerState>(); });
    for (auto& state : states) // the stage's census, over every format it comes in
        state->parser.report_paths_to(m_census);
    decltype(run)::Steps steps;
    steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockResult& result) {
        io::LineCursor cursor(block.block.lines());
        while (auto line = cursor.next()) {
            auto& outcome = result.outcomes.emplace_back();
            outcome.line = *line;
            if (line->bytes.size() > m_options.input.max_record_bytes) {
                outcome.kind = Outcome::Kind::too_long;
                continue;
            }
            if (auto failure = state.parser.parse(line->bytes)) {
                outcome.kind = Outcome::Kind::failed;
                outcome.column = failure->column;
                outcome.message = std::move(failure->message);
                continue;
            }
            auto found = reader.extract(state.parser);
            if (!found.problem.empty()) {
                outcome.kind = Outcome::Kind::failed;
                outcome.message = std::move(found.problem);
                continue;
            }
            outcome.key_at = static_cast<std::uint32_t>(result.keys.size());
            if (m_prefetch) outcome.key_hash = KeyIndex::hash_of(found.key);
            result.keys.append(found.key);
            outcome.key_size = static_cast<std::uint32_t>(found.key.size());
            outcome.by_at = static_cast<std::uint32_t>(result.keys.size());
            result.keys.append(found.by);
            outcome.by_size = static_cast<std::uint32_t>(found.by.size());
            outcome.time = found.time;
            outcome.payload = found.payload;
        }
        result.lines = cursor.lines_seen();
    };
    const BlockResult* block_result = nullptr;
    steps.prepare = [&](const run::InputBlock&, BlockResult& result) { block_result = &result; };
    // A ledger of millions of keys is not in the cache: a record's key is
    // asked for its slot 16 records ahead and its entry 8 ahead (a miss
    // each was a third of a 10-million-event run).
    constexpr std::size_t k_slot_ahead = 16, k_entry_ahead = 8;
    auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t index) {
        if (m_prefetch) {
            const auto& outcomes = block_result->outcomes;
            if (index + k_slot_ahead < outcomes.size())
                m_prefetch(outcomes[index + k_slot_ahead].key_hash, false);
            if (index + k_entry_ahead < outcomes.size())
                m_prefetch(outcomes[index + k_entry_ahead].key_hash, true);
        }
        if (outcome.kind == Outcome::Kind::too_long) return;
        if (outcome.kind == Outcome::Kind::failed) {
            if (m_first_problem.empty()) m_first_problem = outcome.message;
            run.rejects().reject(record, outcome.column, outcome.message);
            return;
        }
        std::string_view texts = block_result->keys;
        take(texts.substr(outcome.key_at, outcome.key_size), outcome.time, outcome.payload,
             record.bytes, texts.substr(outcome.by_at, outcome.by_size));
    };
    run.run(states, steps, route);
    m_rejected += run.rejects().count();
}

void StageReader::read_query_rows(const StageInput& stage, const Take& take) {
    run::RejectRouter rejects(m_reject_sink.get(), m_options.strictness, m_diagnostics,
                              m_options.input.max_record_bytes);
    Reader reader(stage);
    record::RecordParser parser;
    parser.report_paths_to(m_census);
    std::string padded;
    auto take_item = [&](std::string_view json, std::uint64_t line) {
        padded.assign(json);
        padded.append(io::k_padding_bytes, ' ');
        run::InputRecord record;
        record.bytes = std::string_view(padded).substr(0, json.size());
        record.source = &stage.path;
        record.line = line;
        if (auto failure = parser.parse(record.bytes)) {
            if (m_first_problem.empty()) m_first_problem = failure->message;
            rejects.reject(record, failure->column, failure->message);
            return;
        }
        auto found = reader.extract(parser);
        if (!found.problem.empty()) {
            if (m_first_problem.empty()) m_first_problem = found.problem;
            rejects.reject(record, 0, found.problem);
            return;
        }
        take(found.key, found.time, found.payload, record.bytes, found.by);
    };
    auto take_row = [&](std::string_view json, const run::RowPosition& at) {
        take_item(json, at.number);
    };
    run::read_sqlite_rows(stage.path, stage.query, take_row);
    m_rejected += rejects.count();
}

} // namespace idem::reconcile::detail
