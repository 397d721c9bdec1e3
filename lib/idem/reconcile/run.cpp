// idem reconcile over its stages (docs/reconcile.md).

#include "idem/reconcile/run.hpp"

#include "idem/reconcile/spill.hpp"

#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/record/record_run.hpp"
#include "idem/record/rows.hpp"
#include "idem/store/open_windows.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_set>

namespace idem::reconcile {

namespace {

enum class StageFormat { ndjson, har, csv, document, sqlite };

// What a stage's file is: by its name (.csv, .har), else by its first
// bytes: a JSON array or an object whose first line is not a whole record
// is one document ([...], or a page {"data": [...]}); else NDJSON.
StageFormat format_of(const StageInput& stage) {
    if (!stage.query.empty()) return StageFormat::sqlite;
    if (stage.path == "-") return StageFormat::ndjson;
    if (stage.path.ends_with(".csv")) return StageFormat::csv;
    if (stage.path.ends_with(".har")) return StageFormat::har;
    std::ifstream in(stage.path, std::ios::binary);
    if (!in)
        throw InputError({stage.path, 0, 0, 0},
                         fmt::format("cannot read stage {}'s input", quote(stage.name)));
    char c = 0;
    while (in.get(c) && (c == ' ' || c == '\n' || c == '\r' || c == '\t')) {
    }
    if (c == '[') return StageFormat::document;
    if (c != '{') return StageFormat::ndjson;
    in.seekg(0);
    std::string first;
    std::getline(in, first);
    auto size = first.size();
    first.append(io::k_padding_bytes, ' ');
    record::RecordParser parser;
    if (parser.parse(std::string_view(first).substr(0, size))) return StageFormat::document;
    // One line holding a page of an export ({"data": [...]} and nothing
    // after it) is a document too.
    static const auto k_data = record::FieldPath::parse("data");
    auto data = parser.find(k_data);
    std::string rest;
    while (std::getline(in, rest))
        if (rest.find_first_not_of(" \t\r") != std::string::npos) return StageFormat::ndjson;
    return data && data->type == record::FieldValue::Type::array ? StageFormat::document
                                                                 : StageFormat::ndjson;
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
    std::uint64_t column = 0;
    std::string message;
};

struct BlockResult {
    std::vector<Outcome> outcomes;
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

// Calls `take(key, time, payload, bytes, record)` for each record of the
// stage; sets aside the others.
using Take =
    std::function<void(std::string_view key, std::optional<Timestamp> time, std::uint64_t payload,
                       std::string_view bytes, std::string_view by)>;

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
        record::RejectRouter rejects(m_reject_sink.get(), m_options.strictness, m_diagnostics,
                                     m_options.max_record_bytes);
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
    void read(const StageInput& stage, const Take& take) {
        record::PathCensus census(m_options.allow_absent);
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
        Take counted = [&](std::string_view key, std::optional<Timestamp> time,
                           std::uint64_t payload, std::string_view bytes, std::string_view by) {
            ++taken;
            take(key, time, payload, bytes, by);
        };
        switch (format_of(stage)) {
        case StageFormat::ndjson:
        case StageFormat::har:
            read_lines(stage, counted);
            break;
        case StageFormat::csv:
            read_rows(stage, counted, StageFormat::csv);
            break;
        case StageFormat::document:
        case StageFormat::sqlite:
            read_rows(stage, counted, format_of(stage));
            break;
        }
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

    void flush() {
        if (m_reject_sink) m_reject_sink->flush();
    }

private:
    void read_lines(const StageInput& stage, const Take& take) {
        record::InputOptions input;
        input.paths = {stage.path};
        input.format = format_of(stage) == StageFormat::har ? record::InputFormat::har
                                                            : record::InputFormat::ndjson;
        input.max_record_bytes = m_options.max_record_bytes;
        record::RecordRunSetup setup{input, m_reject_sink.get(), m_options.strictness,
                                     m_options.threads};
        record::RecordRun<WorkerState, BlockResult> run(setup, m_diagnostics);
        Reader reader(stage);
        auto states = run.states([] { return std::make_unique<WorkerState>(); });
        for (auto& state : states) // the stage's census, over every format it comes in
            state->parser.report_paths_to(m_census);
        decltype(run)::Steps steps;
        steps.judge = [&](const record::InputBlock& block, WorkerState& state,
                          BlockResult& result) {
            io::LineCursor cursor(block.block.lines());
            while (auto line = cursor.next()) {
                auto& outcome = result.outcomes.emplace_back();
                outcome.line = *line;
                if (line->bytes.size() > m_options.max_record_bytes) {
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
        steps.prepare = [&](const record::InputBlock&, BlockResult& result) {
            block_result = &result;
        };
        auto route = [&](Outcome& outcome, record::InputRecord& record, std::size_t) {
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

    // A CSV file's rows, a query's rows, or the items of a JSON document,
    // each as a record.
    void read_rows(const StageInput& stage, const Take& take, StageFormat format) {
        record::RejectRouter rejects(m_reject_sink.get(), m_options.strictness, m_diagnostics,
                                     m_options.max_record_bytes);
        Reader reader(stage);
        record::RecordParser parser;
        parser.report_paths_to(m_census);
        std::string padded;
        auto take_item = [&](std::string_view json, std::uint64_t line) {
            padded.assign(json);
            padded.append(io::k_padding_bytes, ' ');
            record::InputRecord record;
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
        auto take_row = [&](std::string_view json, const record::RowPosition& at) {
            take_item(json, at.number);
        };
        if (format == StageFormat::csv) {
            record::read_csv_rows(stage.path, take_row);
        } else if (format == StageFormat::sqlite) {
            record::read_sqlite_rows(stage.path, stage.query, take_row);
        } else {
            std::ifstream in(stage.path, std::ios::binary);
            nlohmann::json document;
            try {
                document = nlohmann::json::parse(in);
            } catch (const nlohmann::json::exception& error) {
                throw InputError({stage.path, 0, 0, 0},
                                 fmt::format("stage {}: not NDJSON, and not one JSON document "
                                             "either ({})",
                                             quote(stage.name), error.what()));
            }
            const nlohmann::json* items = &document;
            if (document.is_object() && document.contains("data") && document["data"].is_array())
                items = &document["data"]; // a page of an export (Stripe's events list)
            if (!items->is_array())
                throw InputError({stage.path, 0, 0, 0},
                                 fmt::format("stage {}: a JSON document here is an array of "
                                             "records or an object with a \"data\" array",
                                             quote(stage.name)));
            std::uint64_t index = 0;
            for (const auto& item : *items)
                take_item(item.dump(), ++index);
        }
        m_rejected += rejects.count();
    }

    const ReconcileRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<io::Sink> m_reject_sink;
    std::uint64_t m_rejected = 0;
    bool m_judge;
    record::PathCensus* m_census = nullptr; // the stage being read's
    std::string m_first_problem;            // why its first record was rejected
    io::Summary m_census_counts;
};

// An OTLP time (fixed64 nanoseconds: a decimal string, or a JSON integer),
// or nullopt for anything else ("12abc", "NaN", past 2^64).
std::optional<std::uint64_t> unix_nanos_of(const nlohmann::json& value) {
    if (value.is_number_unsigned()) return value.get<std::uint64_t>();
    if (!value.is_string()) return std::nullopt;
    const auto& text = value.get_ref<const std::string&>();
    std::uint64_t nanos = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), nanos);
    if (error != std::errc() || end != text.data() + text.size() || text.empty())
        return std::nullopt;
    return nanos;
}

// Why a span of a stage cannot be read, or "".
std::string span_problem(const nlohmann::json& span) {
    if (!span.contains("traceId") || !span["traceId"].is_string() ||
        span["traceId"].get_ref<const std::string&>().empty())
        return "span without a traceId";
    if (span.contains("startTimeUnixNano") && !unix_nanos_of(span["startTimeUnixNano"]))
        return fmt::format("span's startTimeUnixNano {} is not a count of nanoseconds",
                           quote(span["startTimeUnixNano"].dump()));
    return "";
}

// Why an export request's structure cannot be walked, or "": every list
// on the way to a span is a list of objects.
std::string request_problem(const nlohmann::json& request) {
    if (!request.is_object()) return "not an OTLP JSON export request (an object)";
    if (!request.contains("resourceSpans")) return "";
    const auto& resources = request["resourceSpans"];
    if (!resources.is_array()) return "resourceSpans is not a list";
    for (const auto& resource : resources) {
        if (!resource.is_object()) return "an item of resourceSpans is not an object";
        if (!resource.contains("scopeSpans")) continue;
        if (!resource["scopeSpans"].is_array()) return "scopeSpans is not a list";
        for (const auto& scope : resource["scopeSpans"]) {
            if (!scope.is_object()) return "an item of scopeSpans is not an object";
            if (!scope.contains("spans")) continue;
            if (!scope["spans"].is_array()) return "spans is not a list";
            for (const auto& span : scope["spans"])
                if (!span.is_object()) return "a span is not an object";
        }
    }
    return "";
}

std::string service_of(const nlohmann::json& resource) {
    std::string service = "unknown";
    if (!resource.contains("resource") || !resource["resource"].is_object()) return service;
    const auto& attributes = resource["resource"].value("attributes", nlohmann::json::array());
    if (!attributes.is_array()) return service;
    for (const auto& attribute : attributes)
        if (attribute.is_object() && attribute.value("key", "") == "service.name" &&
            attribute.contains("value") && attribute["value"].is_object())
            service = attribute["value"].value("stringValue", service);
    return service;
}

// Every span of a stage's name in an OTLP JSON file (one export request per
// line, or one document): the key is its trace id, the time its start. A
// request whose structure is not OTLP's is rejected whole, a span of a
// stage that cannot be read alone (a missing traceId, a time that is not
// nanoseconds): each counts as a record, so in = reached + rejected.
// Returns the services that sent each stage's spans.
std::vector<std::set<std::string>> read_traces(
    const ReconcileRunOptions& options, record::RejectRouter& rejects,
    const std::function<void(std::size_t stage, std::string_view trace, Timestamp start)>& take) {
    std::vector<std::set<std::string>> services(options.stages.size());
    std::ifstream in(options.traces_path, std::ios::binary);
    if (!in) throw InputError({options.traces_path, 0, 0, 0}, "cannot read the --traces file");
    std::map<std::string_view, std::size_t> stage_of;
    for (std::size_t s = 0; s < options.stages.size(); ++s)
        if (!options.stages[s].span.empty()) stage_of.emplace(options.stages[s].span, s);
    std::string line;
    std::uint64_t line_number = 0;
    std::uint64_t offset = 0;
    while (std::getline(in, line)) {
        ++line_number;
        record::InputRecord record;
        record.source = &options.traces_path;
        record.line = line_number;
        record.byte_offset = offset;
        offset += line.size() + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        nlohmann::json request;
        try {
            request = nlohmann::json::parse(line);
        } catch (const nlohmann::json::exception& error) {
            throw InputError({options.traces_path, line_number, 0, 0},
                             fmt::format("not an OTLP JSON export request ({})", error.what()));
        }
        if (auto problem = request_problem(request); !problem.empty()) {
            record.bytes = line;
            rejects.reject(record, 0, problem);
            continue;
        }
        if (!request.contains("resourceSpans")) continue;
        for (const auto& resource : request["resourceSpans"]) {
            if (!resource.contains("scopeSpans")) continue;
            auto service = service_of(resource);
            for (const auto& scope : resource["scopeSpans"]) {
                if (!scope.contains("spans")) continue;
                for (const auto& span : scope["spans"]) {
                    auto name = span.value("name", nlohmann::json()).is_string()
                                    ? span["name"].get<std::string>()
                                    : std::string();
                    auto found = stage_of.find(name);
                    if (found == stage_of.end()) continue;
                    if (auto problem = span_problem(span); !problem.empty()) {
                        auto bytes = span.dump();
                        record.bytes = bytes;
                        rejects.reject(record, 0, problem);
                        continue;
                    }
                    services[found->second].insert(service);
                    auto nanos = span.contains("startTimeUnixNano")
                                     ? *unix_nanos_of(span["startTimeUnixNano"])
                                     : 0;
                    take(found->second, span["traceId"].get_ref<const std::string&>(),
                         Timestamp(Duration(static_cast<std::int64_t>(nanos / 1000))));
                }
            }
        }
    }
    return services;
}

// --- T+1: the keys still pending, kept in a store between runs ---------------
//
// Two generations under the flow's scope, in the store's open-window role
// (docs/stores.md): "reconcile SCOPE" holds what the last run left, with
// the fingerprint of that run's inputs; "reconcile SCOPE (before)" what
// that run started from. A run over the very same inputs again (yesterday's
// job re-run) starts from the earlier generation, so that its keys are not
// counted twice and its losses not reported twice.
class PendingStore {
public:
    explicit PendingStore(const ReconcileRunOptions& options)
        : m_current("reconcile " + options.scope), m_before(m_current + " (before)"),
          m_settled(m_current + " (settled)"), m_inputs(fingerprint(options)),
          m_run(std::hash<std::string>{}(m_inputs) | 1) {
        auto location = store::parse_store_uri(options.store_uri);
        if (location.kind == store::StoreKind::memory)
            throw UsageError("reconcile --store keeps pending keys for the next run: a file or "
                             "redis://, not :memory:");
        location.lock_timeout = options.lock_timeout;
        location.cache_bytes = 16ULL << 20;
        m_store = store::open_store(location);
    }

    std::vector<CarriedKey> load(std::size_t stages) {
        auto& windows = m_store->open_windows();
        std::string meta;
        auto rows = windows.load_windows(m_current, meta);
        if (!meta.empty() && inputs_of(meta) == m_inputs) {
            // These very inputs were judged already: start from what that run started from.
            m_rerun = true;
            rows = windows.load_windows(m_before, meta);
        } else {
            m_previous = rows;
            m_previous_meta = meta;
        }
        std::vector<CarriedKey> carried;
        carried.reserve(rows.size());
        for (auto& [key, bytes] : rows) {
            auto decoded = decode_carried(key, bytes, stages);
            if (!decoded)
                throw StoreError(fmt::format(
                    "store {}: the pending keys of {} were kept for another set of stages (or "
                    "are damaged); use another --scope for this flow",
                    m_store->describe(), quote(m_current)));
            carried.push_back(std::move(*decoded));
        }
        return carried;
    }

    void save(const std::vector<CarriedKey>& carry) {
        auto& windows = m_store->open_windows();
        if (!m_rerun) {
            windows.clear_windows(m_before);
            if (!m_previous_meta.empty())
                windows.save_windows(m_before, {std::move(m_previous), {}, m_previous_meta});
        }
        windows.clear_windows(m_current);
        store::WindowChanges changes;
        changes.saved.reserve(carry.size());
        for (const auto& carried : carry)
            changes.saved.emplace_back(carried.key, encode_carried(carried));
        changes.meta = nlohmann::json{{"inputs", m_inputs}}.dump();
        windows.save_windows(m_current, changes);
        m_store->commit();
    }

    // The keys earlier runs settled (--remember), but those these very
    // inputs settled when they were judged before.
    RememberedKeys load_settled(std::size_t stages) {
        std::string meta;
        RememberedKeys remembered(stages);
        for (auto& [key, bytes] : m_store->open_windows().load_windows(m_settled, meta)) {
            auto decoded = decode_remembered(bytes, stages);
            if (!decoded)
                throw StoreError(fmt::format("store {}: the settled keys of {} were kept for "
                                             "another set of stages (or are damaged); use "
                                             "another --scope for this flow",
                                             m_store->describe(), quote(m_current)));
            if (decoded->run == m_run) continue;
            remembered.add(key, *decoded);
        }
        return remembered;
    }

    // This run's settled keys in; those settled longer than `remember`
    // before `now` (the latest event time) out.
    void save_settled(std::vector<std::tuple<std::string, std::string, std::int64_t>>& settled,
                      const RememberedKeys& remembered, std::optional<Timestamp> now,
                      Duration remember) {
        store::WindowChanges changes;
        auto cutoff = now ? now->time_since_epoch().count() - remember.count()
                          : std::numeric_limits<std::int64_t>::min();
        remembered.for_each([&](std::string_view key, std::int64_t settled_us) {
            if (settled_us != 0 && settled_us < cutoff) changes.removed.emplace_back(key);
        });
        for (auto& [key, bytes, settled_us] : settled) {
            if (settled_us != 0 && settled_us < cutoff) continue;
            // The run that settled it: the last 8 bytes (encode_remembered).
            std::memcpy(bytes.data() + bytes.size() - sizeof m_run, &m_run, sizeof m_run);
            changes.saved.emplace_back(std::move(key), std::move(bytes));
        }
        m_store->open_windows().save_windows(m_settled, changes);
        m_store->commit();
    }

    [[nodiscard]] bool rerun() const { return m_rerun; }

private:
    // What names a run's inputs: each stage's file, size and modification
    // time. Standard input never matches (it is read once).
    static std::string fingerprint(const ReconcileRunOptions& options) {
        nlohmann::json inputs = nlohmann::json::array();
        auto add = [&](const std::string& name, const std::string& path) {
            if (path == "-") {
                inputs.push_back(
                    {name, "-", std::chrono::system_clock::now().time_since_epoch().count()});
                return;
            }
            std::error_code error;
            auto size = std::filesystem::file_size(path, error);
            auto modified = std::filesystem::last_write_time(path, error);
            inputs.push_back({name, std::filesystem::absolute(path, error).string(),
                              error ? 0 : size, modified.time_since_epoch().count()});
        };
        for (const auto& stage : options.stages)
            if (stage.span.empty()) add(stage.name, stage.path);
        if (!options.traces_path.empty()) add("traces", options.traces_path);
        return inputs.dump();
    }
    static std::string inputs_of(const std::string& meta) {
        auto json = nlohmann::json::parse(meta, nullptr, false);
        if (!json.is_object() || !json.contains("inputs") || !json["inputs"].is_string()) return {};
        return json["inputs"].get<std::string>();
    }

    std::unique_ptr<store::Store> m_store;
    std::string m_current, m_before, m_settled, m_inputs;
    std::uint64_t m_run; // this run's inputs, as settled keys name them
    bool m_rerun = false;
    std::vector<std::pair<std::string, std::string>> m_previous;
    std::string m_previous_meta;
};

} // namespace

ReconcileResult run_reconcile(const ReconcileRunOptions& options, io::Sink& output,
                              io::Diagnostics& diagnostics) {
    auto start = std::chrono::steady_clock::now();
    LedgerOptions ledger_options;
    for (const auto& stage : options.stages)
        ledger_options.stages.push_back(stage.name);
    ledger_options.grace = options.grace;
    ledger_options.sla = options.sla;
    ledger_options.examples = options.examples;
    ledger_options.carry_pending = !options.store_uri.empty();
    std::optional<PendingStore> pending;
    RememberedKeys remembered(options.stages.size());
    if (!options.store_uri.empty()) {
        pending.emplace(options);
        if (options.remember.count() > 0) {
            remembered = pending->load_settled(options.stages.size());
            ledger_options.remembered = &remembered;
            ledger_options.remember = options.remember;
            ledger_options.report_settled = true;
        }
    }
    Ledger ledger(ledger_options);
    std::optional<Timestamp> latest;
    if (pending) {
        for (const auto& carried : pending->load(options.stages.size())) {
            ledger.carry_in(carried);
            // Their times count towards "now": a run with nothing newer
            // keeps them pending rather than calling them lost.
            for (const auto& seen : carried.sightings)
                if (seen.timed) {
                    Timestamp last{Duration(seen.last_us)};
                    if (!latest || last > *latest) latest = last;
                }
        }
        if (pending->rerun())
            diagnostics.warning({},
                                "these inputs were reconciled before with this store: starting "
                                "from the pending keys that run started from, not from its own");
    }
    // About as many keys as the first stage has lines: sized once.
    if (options.stages.front().path != "-") {
        std::error_code ignored;
        auto bytes = std::filesystem::file_size(options.stages.front().path, ignored);
        auto expected = std::min<std::uintmax_t>(bytes / 100, 50'000'000);
        if (options.spill_after > 0)
            expected = std::min<std::uintmax_t>(expected, options.spill_after);
        if (!ignored) ledger.expect_keys(expected);
    }
    std::uint64_t records = 0;
    // A reader per run shares one reject file across the stages.
    StageReader reader(options, diagnostics);
    // Past --spill-after keys: every key so far to the partition files, and
    // the ledger starts again (docs/reconcile.md, "Memory and speed").
    std::unique_ptr<KeySpill> spill;
    auto spill_keys = [&] {
        if (!spill) {
            auto directory = options.spill_directory.empty()
                                 ? std::filesystem::temp_directory_path()
                                 : options.spill_directory;
            spill = std::make_unique<KeySpill>(directory, options.stages.size());
        }
        ledger.drain([&](const CarriedKey& key) { spill->add(key); });
    };
    auto see = [&](std::size_t s, std::string_view key, std::optional<Timestamp> time,
                   std::uint64_t payload, std::string_view by) {
        ++records;
        ledger.count_record(s);
        ledger.see(s, key, time, payload, by);
        if (time && (!latest || *time > *latest)) latest = time;
        if (options.spill_after > 0 && ledger.keys() >= options.spill_after) spill_keys();
    };
    std::vector<std::set<std::string>> services;
    if (!options.traces_path.empty())
        services = reader.read_other([&](record::RejectRouter& rejects) {
            return read_traces(options, rejects,
                               [&](std::size_t s, std::string_view trace, Timestamp span_start) {
                                   see(s, trace, span_start, 0, {});
                               });
        });
    for (std::size_t s = 0; s < options.stages.size(); ++s) {
        if (!options.stages[s].span.empty()) continue; // read with the traces
        reader.read(options.stages[s],
                    [&](std::string_view key, std::optional<Timestamp> time, std::uint64_t payload,
                        std::string_view, std::string_view by) { see(s, key, time, payload, by); });
    }
    Reconciliation reconciliation;
    if (!spill) {
        reconciliation = ledger.reconcile(latest);
    } else {
        // A partition at a time: each key is in one partition only, so the
        // parts add up to what one ledger of everything would say.
        spill_keys();
        for (std::size_t p = 0; p < KeySpill::k_partitions; ++p) {
            Ledger part(ledger_options);
            spill->read(p, [&](const CarriedKey& key) { part.merge_in(key); });
            auto judged = part.judge(latest);
            for (std::size_t h = 0; h < judged.latencies.size(); ++h) {
                spill->add_latencies(h, judged.latencies[h]);
                judged.latencies[h] = {};
            }
            add_reconciliation(reconciliation, std::move(judged));
        }
        for (std::size_t s = 0; s < reconciliation.stages.size(); ++s)
            reconciliation.stages[s].records = ledger.records(s);
        reconciliation.carried_in = ledger.carried_in();
        finish_reconciliation(reconciliation, ledger_options,
                              [&](std::size_t hop, double fraction) {
                                  return spill->latency_percentile(hop, fraction);
                              });
    }
    reconciliation.carried = pending.has_value();
    if (pending) {
        pending->save(reconciliation.carry);
        if (ledger_options.report_settled)
            pending->save_settled(reconciliation.settled, remembered, latest, options.remember);
    }
    // The missing-span ratio per service: of the traces that reached the
    // stage before a span stage, how many lack that stage's span.
    std::map<std::string, ServiceFigures> by_service;
    for (std::size_t s = 1; s < services.size(); ++s) {
        const auto& hop = reconciliation.hops[s - 1];
        for (const auto& service : services[s]) {
            auto& figures = by_service[service];
            figures.service = service;
            figures.expected += hop.reached + hop.lost;
            figures.missing += hop.lost;
        }
    }
    for (auto& [name, figures] : by_service) {
        figures.missing_ratio = figures.expected == 0 ? 0.0
                                                      : static_cast<double>(figures.missing) /
                                                            static_cast<double>(figures.expected);
        reconciliation.services.push_back(figures);
    }
    std::uint64_t missing_written = 0, missing_filtered = 0;
    io::Summary filter_counts;
    if (!options.missing_path.empty()) {
        // Again over the stages that hold lost keys first: each lost event
        // once, as that stage recorded it (envelopes with their headers).
        // Whole or not at all: a --filter path no lost event holds (a typo)
        // leaves the file as it was, instead of an empty list to resend.
        auto sink = io::Sink::replace_file(options.missing_path);
        record::RecordParser filter_parser;
        // --filter's paths and values, against the lost events it sees.
        record::PathCensus filter_census(options.allow_absent);
        for (const auto& [path, value] : options.missing_filters)
            filter_census.expect_value("--filter", path, value);
        filter_parser.report_paths_to(&filter_census);
        std::string padded;
        auto wanted_by_filters = [&](std::string_view bytes) {
            padded.assign(bytes);
            padded.append(io::k_padding_bytes, ' ');
            if (filter_parser.parse(std::string_view(padded).substr(0, bytes.size()))) return false;
            for (const auto& [path, value] : options.missing_filters) {
                auto found = filter_parser.find(path);
                if (!found || found->text != value) return false;
            }
            return true;
        };
        std::unordered_set<std::string> written;
        io::SilentDiagnostics quiet;
        ReconcileRunOptions again = options;
        again.reject_path.clear();
        StageReader rereader(again, quiet, false);
        for (std::size_t s = 0; s < options.stages.size(); ++s) {
            // A span cannot be sent again: lost keys first seen in a trace
            // are in the report only.
            bool wanted = options.stages[s].span.empty() &&
                          std::any_of(reconciliation.missing.begin(), reconciliation.missing.end(),
                                      [&](const auto& entry) { return entry.second == s; });
            if (!wanted) continue;
            rereader.read(options.stages[s],
                          [&](std::string_view key, std::optional<Timestamp>, std::uint64_t,
                              std::string_view bytes, std::string_view) {
                              auto found = reconciliation.missing.find(std::string(key));
                              if (found == reconciliation.missing.end() || found->second != s)
                                  return;
                              if (!written.insert(found->first).second) return;
                              if (!options.missing_filters.empty() && !wanted_by_filters(bytes)) {
                                  ++missing_filtered;
                                  return;
                              }
                              sink->write_record(bytes);
                              ++missing_written;
                          });
        }
        sink->flush();
        filter_census.report(diagnostics, filter_counts);
        if (filter_counts.count("absent_paths") == 0) sink->publish();
    }
    std::string text;
    render_report(reconciliation, options.report, text);
    if (options.report == ReportFormat::table) text = fit_lines(text, options.table_width);
    output.write(text);
    output.flush();
    reader.flush();

    ReconcileResult result;
    auto& summary = result.summary;
    summary.command = "reconcile";
    summary.counts = {{"in", records + reader.rejected()}, {"keys", reconciliation.keys}};
    for (std::size_t i = 0; i < k_finding_kinds; ++i)
        summary.counts.emplace_back(std::string(finding_name(static_cast<Finding>(i))),
                                    reconciliation.counts[i]);
    summary.counts.emplace_back("rejected", reader.rejected());
    for (const io::Summary* counts :
         {&reader.census(), static_cast<const io::Summary*>(&filter_counts)})
        for (const auto& [name, count] : counts->counts) {
            auto known = std::find_if(summary.counts.begin(), summary.counts.end(),
                                      [&](const auto& c) { return c.first == name; });
            if (known == summary.counts.end())
                summary.counts.emplace_back(name, count);
            else
                known->second += count;
        }
    if (!options.missing_path.empty()) {
        summary.counts.emplace_back("missing_file", missing_written);
        if (!options.missing_filters.empty())
            summary.counts.emplace_back("missing_filtered_out", missing_filtered);
    }
    if (pending) {
        summary.counts.emplace_back("carried_in", reconciliation.carried_in);
        summary.counts.emplace_back("carried_out", reconciliation.carry.size());
        if (options.remember.count() > 0)
            summary.counts.emplace_back("seen_before", reconciliation.seen_before);
    }
    if (spill)
        summary.facts.emplace_back("grouped",
                                   fmt::format("on disk, {} partitions, {:.1f} MB spilled",
                                               KeySpill::k_partitions,
                                               static_cast<double>(spill->bytes_written()) / 1e6));
    summary.parts_name = "hop";
    for (const auto& hop : reconciliation.hops) {
        io::Summary::Part part;
        part.name = fmt::format("{}>{}", hop.from, hop.to);
        part.counts = {{"keys", hop.keys},
                       {"reached", hop.reached},
                       {"lost", hop.lost},
                       {"pending", hop.pending}};
        part.ratios = {{"loss_rate", hop.loss_rate}};
        summary.parts.push_back(std::move(part));
    }
    summary.seconds = io::seconds_since(start);
    result.reconciliation = std::move(reconciliation);
    return result;
}

} // namespace idem::reconcile
