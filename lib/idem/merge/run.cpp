// idem merge over a stream of records (docs/merge.md).

#include "idem/merge/run.hpp"

#include "idem/merge/windows.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/run/record_run.hpp"
#include "idem/store/checkpoints.hpp"
#include "idem/store/open_windows.hpp"
#include "idem/store/owned_outputs.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <cmath>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>
#include <utility>

namespace idem::merge {

namespace {

using Json = nlohmann::ordered_json;

// What a worker found for one line; the ordered stage acts on it.
struct Outcome {
    enum class Kind : std::uint8_t {
        too_long,
        failed_to_parse,
        bad_field, // a time, or an aggregate's value, that is not one
        bypass,
        unmatched,
        unkeyed, // a group field missing, under --missing pass
        member,
    };
    io::BlockLine line;
    Kind kind = Kind::member;
    bool has_annotations = false;
    bool has_rule = false; // a rule matched (its counts include the record)
    std::uint32_t rule = 0;
    std::uint32_t group_at = 0, group_size = 0; // in BlockResult::texts
    std::uint32_t values_at = 0;                // in BlockResult::values
    std::optional<Timestamp> time;
    std::uint64_t column = 0;
    std::string message; // bad_field, failed_to_parse, or the missing group field
};

struct BlockResult {
    std::vector<Outcome> outcomes;
    std::uint64_t lines = 0;
    std::string texts;
    std::vector<Value> values;

    void clear() {
        outcomes.clear();
        lines = 0;
        texts.clear();
        values.clear();
    }
};

struct WorkerState {
    record::RecordParser parser;
};

// The value an aggregate reads from the record the parser holds; a message
// when the record cannot be merged by it.
std::optional<std::string> read_value(record::RecordParser& parser, std::string_view line,
                                      const Aggregate& aggregate, Value& value) {
    if (aggregate.function == Function::count) return std::nullopt;
    if (aggregate.whole_event) {
        // A plain event as it came (it is JSON already); an envelope's body
        // in canonical JSON.
        if (parser.shape() == record::RecordShape::envelope) {
            static const record::IgnoredPaths k_nothing_ignored;
            if (auto event = parser.canonical_event(k_nothing_ignored))
                value.text.assign(*event);
            else
                return std::nullopt;
        } else {
            value.text.assign(record::event_text(line));
        }
        value.present = true;
        value.type = record::FieldValue::Type::object;
        return std::nullopt;
    }
    auto found = parser.find(*aggregate.input);
    if (!found) {
        if (is_numeric(aggregate.function))
            return fmt::format("missing field '{}' ({}() of {})", aggregate.input->text(),
                               function_name(aggregate.function), aggregate.output);
        return std::nullopt;
    }
    if (is_numeric(aggregate.function) && found->type != record::FieldValue::Type::number)
        return fmt::format("field '{}' is not a number ({}() of {})", aggregate.input->text(),
                           function_name(aggregate.function), aggregate.output);
    value.present = true;
    value.type = found->type;
    value.text.assign(found->text);
    return std::nullopt;
}

void judge_line(const io::BlockLine& line, Outcome& outcome, BlockResult& result,
                WorkerState& state, const MergeRunOptions& options) {
    auto& parser = state.parser;
    if (!run::parse_line(line, options.input.max_record_bytes, parser, outcome)) return;
    outcome.has_annotations = parser.has_annotations();
    const auto& rules = options.rules;
    std::size_t rule = 0;
    for (; rule < rules.size(); ++rule)
        if (std::all_of(rules[rule].match.begin(), rules[rule].match.end(),
                        [&](const Condition& condition) { return holds(parser, condition); }))
            break;
    if (rule < rules.size()) {
        outcome.rule = static_cast<std::uint32_t>(rule);
        outcome.has_rule = true; // a bypassed record counts for the rule it would have gone to
    }
    for (const auto& condition : options.bypass)
        if (holds(parser, condition)) {
            outcome.kind = Outcome::Kind::bypass;
            return;
        }
    if (rule == rules.size()) {
        outcome.kind = Outcome::Kind::unmatched;
        return;
    }
    auto time = record::event_time(parser, options.time_field ? &*options.time_field : nullptr,
                                   options.zone ? &*options.zone : nullptr);
    if (time.failed()) {
        outcome.kind = Outcome::Kind::bad_field;
        outcome.message = record::describe_failure(time, *options.time_field);
        return;
    }
    if (time.time && *time.time > options.now + options.max_future) {
        outcome.kind = Outcome::Kind::bad_field;
        outcome.message = fmt::format(
            "event time {} is more than --max-future {} ahead of the clock ({}): it would close "
            "every window",
            format_rfc3339(*time.time), format_duration(options.max_future),
            format_rfc3339(options.now));
        return;
    }
    outcome.time = time.time;
    auto& texts = result.texts;
    auto at = texts.size();
    for (std::size_t i = 0; i < rules[rule].group.size(); ++i) {
        auto value = parser.find(rules[rule].group[i]);
        if (!value) {
            texts.resize(at);
            outcome.kind = options.missing == MissingGroup::pass ? Outcome::Kind::unkeyed
                                                                 : Outcome::Kind::bad_field;
            outcome.message = fmt::format("missing group field '{}' (rule {})",
                                          rules[rule].group[i].text(), quote(rules[rule].name));
            return;
        }
        if (i > 0) texts += ' ';
        record::append_encoded_value(texts, *value);
    }
    outcome.group_at = static_cast<std::uint32_t>(at);
    outcome.group_size = static_cast<std::uint32_t>(texts.size() - at);
    auto values_at = result.values.size();
    outcome.values_at = static_cast<std::uint32_t>(values_at);
    for (const auto& aggregate : rules[rule].aggregates) {
        auto& value = result.values.emplace_back();
        if (auto problem = read_value(parser, line.bytes, aggregate, value)) {
            result.values.resize(values_at);
            texts.resize(at);
            outcome.kind = Outcome::Kind::bad_field;
            outcome.message = std::move(*problem);
            return;
        }
    }
    outcome.kind = Outcome::Kind::member;
}

void judge_block(const run::InputBlock& block, WorkerState& state, const MergeRunOptions& options,
                 BlockResult& result) {
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        judge_line(*line, outcome, result, state, options);
    }
    result.lines = cursor.lines_seen();
}

// --- rendering ----------------------------------------------------------

void append_value(std::string& out, const KeptValue& value) {
    if (!value.present) {
        out += "null";
        return;
    }
    if (value.type == record::FieldValue::Type::string)
        record::append_json_string(out, value.text.view());
    else
        out += value.text.view(); // a number, true/false/null, or JSON text
}

void append_number(std::string& out, double value) {
    if (std::isfinite(value))
        fmt::format_to(std::back_inserter(out), "{}", value);
    else
        out += "null";
}

void append_aggregate(std::string& out, const Aggregate& aggregate,
                      const Accumulator& accumulator) {
    switch (aggregate.function) {
    case Function::count:
        fmt::format_to(std::back_inserter(out), "{}", accumulator.n);
        return;
    case Function::first:
        append_value(out, accumulator.first);
        return;
    case Function::last:
        append_value(out, accumulator.last);
        return;
    case Function::append:
    case Function::distinct:
        out += '[';
        for (std::size_t i = 0; i < accumulator.items.size(); ++i) {
            if (i > 0) out += ',';
            append_value(out, accumulator.items[i]);
        }
        out += ']';
        return;
    case Function::concat:
        if (accumulator.n == 0)
            out += "null";
        else
            record::append_json_string(out, accumulator.joined);
        return;
    case Function::sum:
        if (accumulator.n == 0)
            out += "null";
        else if (accumulator.integral)
            fmt::format_to(std::back_inserter(out), "{}", accumulator.int_sum);
        else
            append_number(out, accumulator.sum);
        return;
    case Function::avg:
        if (accumulator.n == 0)
            out += "null";
        else
            append_number(out, accumulator.sum / static_cast<double>(accumulator.n));
        return;
    case Function::min:
        out += accumulator.min ? accumulator.min_text : std::string("null");
        return;
    case Function::max:
        out += accumulator.max ? accumulator.max_text : std::string("null");
        return;
    }
}

// Renders merged records: the base member with each aggregate's field set
// (replacing a field of that name), and `_idem.merge` saying what went into
// it. The base is parsed once per window, never the members.
class Renderer {
public:
    std::string render(const WindowState& window, const MergeRule& rule) {
        std::string out;
        out.reserve(window.base.size() + 256);
        out += '{';
        bool first = true;
        auto separator = [&] {
            if (!first) out += ',';
            first = false;
        };
        std::string_view idem_members; // the base's own "_idem" members, kept
        simdjson::dom::object base;
        auto base_bytes = window.base.view();
        bool parsed =
            m_parser.parse(base_bytes.data(), base_bytes.size()).get(base) == simdjson::SUCCESS;
        // An action's figure whose name the record already uses goes under
        // _idem.merge: the record's own field stays as it was.
        m_displaced.assign(rule.aggregates.size(), false);
        if (parsed)
            for (std::size_t i = 0; i < rule.aggregates.size(); ++i)
                if (rule.aggregates[i].from_action) {
                    simdjson::dom::element own;
                    m_displaced[i] =
                        base.at_key(rule.aggregates[i].output).get(own) == simdjson::SUCCESS;
                    if (m_displaced[i] && std::find(m_collided.begin(), m_collided.end(),
                                                    rule.aggregates[i].output) == m_collided.end())
                        m_collided.push_back(rule.aggregates[i].output);
                }
        if (parsed) {
            for (auto field : base) {
                if (field.key == "_idem") {
                    simdjson::dom::object annotations;
                    if (field.value.get(annotations) == simdjson::SUCCESS) {
                        m_annotations.clear();
                        for (auto annotation : annotations) {
                            if (annotation.key == "merge") continue;
                            if (!m_annotations.empty()) m_annotations += ',';
                            record::append_json_string(m_annotations, annotation.key);
                            m_annotations += ':';
                            m_annotations += simdjson::minify(annotation.value);
                        }
                        idem_members = m_annotations;
                    }
                    continue;
                }
                bool replaced = false;
                for (std::size_t i = 0; i < rule.aggregates.size(); ++i)
                    if (rule.aggregates[i].output == field.key && !m_displaced[i]) replaced = true;
                if (replaced) continue;
                separator();
                record::append_json_string(out, field.key);
                out += ':';
                out += simdjson::minify(field.value);
            }
        }
        std::string displaced;
        for (std::size_t i = 0; i < rule.aggregates.size(); ++i) {
            // _idem.merge.count is the window's count already.
            if (m_displaced[i] && rule.aggregates[i].output == "count" &&
                rule.aggregates[i].function == Function::count)
                continue;
            auto& to = m_displaced[i] ? displaced : out;
            if (m_displaced[i])
                to += ',';
            else
                separator();
            record::append_json_string(to, rule.aggregates[i].output);
            to += ':';
            append_aggregate(to, rule.aggregates[i], window.accumulators[i]);
        }
        separator();
        out += R"("_idem":{)";
        if (!idem_members.empty()) {
            out += idem_members;
            out += ',';
        }
        append_evidence(out, window, rule, displaced);
        out += "}}";
        return out;
    }

    // The names of an action's figures that a record already had as fields
    // of its own, since the last call (for one warning).
    std::vector<std::string> take_collisions() { return std::exchange(m_collided, {}); }

private:
    static void append_evidence(std::string& out, const WindowState& window, const MergeRule& rule,
                                std::string_view displaced) {
        auto start = rule.window.kind == WindowKind::session ? window.first_at : window.start;
        auto end =
            rule.window.kind == WindowKind::session ? window.last_at + rule.window.gap : window.end;
        out += R"("merge":{"id":)";
        record::append_json_string(out, window_id(rule.name, window));
        out += R"(,"rule":)";
        record::append_json_string(out, rule.name);
        out += R"(,"group":)";
        out += record::encoded_values_json(window.group, rule.group.size());
        fmt::format_to(std::back_inserter(out), R"(,"window":{{"start":"{}","end":"{}"}})",
                       format_rfc3339(start), format_rfc3339(end));
        if (window.part > 0) fmt::format_to(std::back_inserter(out), R"(,"part":{})", window.part);
        fmt::format_to(std::back_inserter(out), R"(,"count":{},"first_at":"{}","last_at":"{}")",
                       window.count, format_rfc3339(window.first_at),
                       format_rfc3339(window.last_at));
        out += R"(,"members":[)";
        for (std::size_t i = 0; i < window.positions.size(); ++i) {
            if (i > 0) out += ',';
            record::append_json_string(out, window.positions[i]);
        }
        out += ']';
        if (window.count > window.positions.size())
            fmt::format_to(std::back_inserter(out), R"(,"members_more":{})",
                           window.count - window.positions.size());
        out += displaced; // ,"count":3 ... when the record had its own
        out += '}';
    }

    simdjson::dom::parser m_parser;
    std::string m_annotations;
    std::vector<bool> m_displaced; // per aggregate, for the window being rendered
    std::vector<std::string> m_collided;
};

std::string describe_window(const WindowState& window, const MergeRule& rule) {
    auto end =
        rule.window.kind == WindowKind::session ? window.last_at + rule.window.gap : window.end;
    auto start = rule.window.kind == WindowKind::session ? window.first_at : window.start;
    return fmt::format("rule {} · group {} · {} .. {} · {} member{}", rule.name,
                       record::encoded_values_json(window.group, rule.group.size()),
                       format_rfc3339(start), format_rfc3339(end), window.count,
                       window.count == 1 ? "" : "s");
}

// --- the run --------------------------------------------------------------

struct RuleCounts {
    std::uint64_t in = 0, merged = 0, out = 0, bypassed = 0, late = 0, rejected = 0;
};

class MergeRun {
public:
    MergeRun(const MergeRunOptions& options, io::Sink& standard_output,
             io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_store(open_store(options)),
          m_outputs(m_store->checkpoints(),
                    {"merge", options.scope, options.input.paths, options.lock_timeout},
                    options.output_path, standard_output, diagnostics),
          m_output(&m_outputs.output()), m_late(m_outputs.add("late", options.late_path)),
          m_unmatched(m_outputs.add("unmatched", options.unmatched_path)),
          m_members(m_outputs.add("members", options.members_path)),
          m_merger(options.rules, merger_options(options)),
          m_run({options.input, m_outputs.add("reject", options.reject_path), options.strictness,
                 options.threads},
                diagnostics),
          m_counts(options.rules.size()) {
        m_run.resume_after(m_outputs.resume_point());
        if (m_outputs.owned() && m_outputs.resumed()) {
            std::string meta;
            auto windows = m_store->open_windows().load_windows(m_outputs.checkpoint_name(), meta);
            m_merger.restore(windows, meta);
            m_restored = windows.size();
        }
    }

    // Every path and value the rules and flags name, for the census: a
    // typo in any of them never passes as a rule that merges nothing.
    void expect_paths() {
        auto& census = m_run.census();
        auto expect = [&census](const std::string& flag, const Condition& condition) {
            if (condition.value)
                census.expect_value(flag, condition.path, *condition.value);
            else
                census.expect_path(flag, condition.path);
        };
        for (const auto& condition : m_options.bypass)
            expect("--bypass", condition);
        for (const auto& rule : m_options.rules) {
            bool from_flags = rule.name == "merge" && m_options.rules.size() == 1;
            auto flag = [&](std::string_view flag_name, std::string_view key) {
                return from_flags ? std::string(flag_name)
                                  : fmt::format("rule {} {}", quote(rule.name), key);
            };
            for (const auto& condition : rule.match)
                expect(flag("--match", "match"), condition);
            for (const auto& path : rule.group)
                census.expect_path(flag("--group", "group"), path);
            for (const auto& aggregate : rule.aggregates)
                if (aggregate.input && !aggregate.whole_event)
                    census.expect_path(flag("--agg", "aggregate"), *aggregate.input);
        }
        if (m_options.time_field) census.expect_path("--time-field", *m_options.time_field);
    }

    MergeResult run() {
        auto start = std::chrono::steady_clock::now();
        expect_paths();
        auto states = m_run.states([] { return std::make_unique<WorkerState>(); });
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockResult& result) {
            judge_block(block, state, m_options, result);
        };
        steps.prepare = [&](const run::InputBlock&, BlockResult& result) {
            m_block = &result;
            m_block_now = now_utc();
        };
        auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t) {
            route_record(outcome, record);
        };
        steps.block_done = [&](std::uint64_t new_records) {
            emit_closed();
            m_since_commit += new_records;
            if (m_since_commit >= m_options.batch) commit();
        };
        // Live input gone quiet: windows that have waited their span by the
        // wall clock close, and what was merged goes out.
        steps.idle = [&] {
            m_merger.close_idle(std::chrono::steady_clock::now());
            emit_closed();
            commit();
        };
        try {
            m_run.run(states, steps, route);
        } catch (const InputError&) {
            emit_closed();
            commit(); // what was merged before the failure stands
            throw;
        }
        m_merger.close_all();
        emit_closed();
        finish();
        auto result = summarize(start);
        m_outputs.add_carried(result.summary.counts);
        m_run.census().report(m_diagnostics, result.summary);
        result.late = result.summary.count("late");
        for (auto& [name, ratio] : result.summary.ratios)
            if (name == "drop_rate" && result.summary.count("in") > 0)
                ratio = static_cast<double>(result.summary.count("merged_away")) /
                        static_cast<double>(result.summary.count("in"));
        return result;
    }

private:
    using Run = run::RecordRun<WorkerState, BlockResult>;

    static std::unique_ptr<store::Store> open_store(const MergeRunOptions& options) {
        // Open windows need a store only to survive a kill, with -o.
        auto location =
            store::parse_store_uri(options.output_path.empty() ? ":memory:" : options.store_uri);
        location.lock_timeout = options.lock_timeout;
        location.cache_bytes = 4ULL << 20;
        return store::open_store(location);
    }

    static MergerOptions merger_options(const MergeRunOptions& options) {
        MergerOptions merger;
        merger.max_lateness = options.max_lateness;
        merger.max_open = options.max_open;
        merger.max_open_bytes = options.max_open_bytes;
        merger.zone = options.zone;
        merger.track_changes = !options.output_path.empty();
        if (options.preview) merger.preview_members = 20;
        return merger;
    }

    void route_record(const Outcome& outcome, run::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long: // the run frame set it aside
            return;
        case Outcome::Kind::failed_to_parse:
            m_run.rejects().reject(record, outcome.column, outcome.message);
            return;
        case Outcome::Kind::bad_field:
            if (outcome.has_rule) {
                ++m_counts[outcome.rule].in;
                ++m_counts[outcome.rule].rejected;
            }
            m_run.rejects().reject(record, outcome.column, outcome.message);
            return;
        case Outcome::Kind::bypass:
            ++m_bypassed;
            if (outcome.has_rule) {
                ++m_counts[outcome.rule].in;
                ++m_counts[outcome.rule].bypassed;
            }
            if (!m_options.preview) {
                m_member.assign(R"("merge":{"bypassed":true})");
                record::write_annotated(*m_output, record.bytes, outcome.has_annotations, m_member);
            }
            return;
        case Outcome::Kind::unmatched:
            ++m_unmatched_count;
            if (m_unmatched)
                m_unmatched->write_record(record.bytes);
            else if (!m_options.preview)
                m_output->write_record(record.bytes);
            return;
        case Outcome::Kind::unkeyed:
            ++m_unkeyed;
            ++m_counts[outcome.rule].in;
            if (!m_options.preview) m_output->write_record(record.bytes);
            return;
        case Outcome::Kind::member:
            merge(outcome, record);
            return;
        }
    }

    void merge(const Outcome& outcome, const run::InputRecord& record) {
        const auto& rule = m_options.rules[outcome.rule];
        auto& counts = m_counts[outcome.rule];
        ++counts.in;
        Member member;
        member.rule = outcome.rule;
        member.group =
            std::string_view(m_block->texts).substr(outcome.group_at, outcome.group_size);
        member.time = outcome.time.value_or(m_block_now);
        member.bytes = record.bytes;
        member.source = record.source;
        member.line = record.line;
        member.values = m_block->values.data() + outcome.values_at;
        auto& ids = m_ids;
        if (m_merger.add(member, m_members ? &ids : nullptr) == 0) {
            ++counts.late;
            route_late(outcome, record, rule, member.time);
        } else {
            ++counts.merged;
            if (m_members) {
                m_member.assign(R"("merge":{"into":[)");
                for (std::size_t i = 0; i < ids.size(); ++i) {
                    if (i > 0) m_member += ',';
                    record::append_json_string(m_member, ids[i]);
                }
                m_member += "]}";
                record::write_annotated(*m_members, record.bytes, outcome.has_annotations,
                                        m_member);
            }
        }
        m_merger.advance(member.time);
    }

    void route_late(const Outcome& outcome, const run::InputRecord& record, const MergeRule& rule,
                    Timestamp time) {
        auto watermark = m_merger.watermark();
        // Nothing is lost unasked: without --late FILE a late record goes to
        // the output as a window of its own, marked; --drop-late drops it.
        if (m_options.drop_late || (!m_late && m_options.preview)) {
            m_diagnostics.warning(
                {*record.source, record.line, 0, record.byte_offset},
                fmt::format("late: its window of rule {} had closed (event time {}, watermark {}); "
                            "dropped{}",
                            quote(rule.name), format_rfc3339(time),
                            watermark ? format_rfc3339(*watermark) : std::string("none"),
                            m_options.drop_late ? " (--drop-late)" : " from the preview"));
            return;
        }
        m_member.assign(R"("merge":{"late":true,"rule":)");
        record::append_json_string(m_member, rule.name);
        m_member += R"(,"at":)";
        record::append_json_string(m_member, format_rfc3339(time));
        if (watermark) {
            m_member += R"(,"watermark":)";
            record::append_json_string(m_member, format_rfc3339(*watermark));
        }
        m_member += R"(,"source":)";
        record::append_json_string(m_member, fmt::format("{}:{}", *record.source, record.line));
        m_member += '}';
        record::write_annotated(m_late ? *m_late : *m_output, record.bytes, outcome.has_annotations,
                                m_member);
    }

    void emit_closed() {
        for (auto& window : m_merger.take_closed()) {
            const auto& rule = m_options.rules[window.rule];
            ++m_counts[window.rule].out;
            if (m_options.preview) {
                preview(window, rule);
                continue;
            }
            m_output->write_record(m_renderer.render(window, rule));
            warn_of_collision(rule);
        }
    }

    // Once per run: a record has a field an action's figure is named after.
    void warn_of_collision(const MergeRule& rule) {
        auto names = m_renderer.take_collisions();
        if (names.empty() || m_collision_warned) return;
        m_collision_warned = true;
        std::string quoted;
        for (const auto& name : names)
            quoted += (quoted.empty() ? "" : ", ") + quote(name);
        m_diagnostics.warning(
            {}, fmt::format("rule {}: records have their own {} field{}; they stay as they were, "
                            "and the rule's figures are under _idem.merge",
                            quote(rule.name), quoted, names.size() == 1 ? "" : "s"));
    }

    // --preview: each window that merged two records or more, with its
    // members and what it would become, up to --preview-limit.
    void preview(const WindowState& window, const MergeRule& rule) {
        if (window.count < 2 || m_previewed >= m_options.preview_limit) return;
        ++m_previewed;
        auto merged = m_renderer.render(window, rule);
        if (m_options.preview_format == PreviewFormat::table) {
            // A table for a person: every value through terminal_text.
            m_output->write(terminal_text(describe_window(window, rule)) + "\n");
            for (const auto& member : window.held)
                m_output->write("    " + terminal_text(member) + "\n");
            if (window.count > window.held.size())
                m_output->write(
                    fmt::format("    ... {} more\n", window.count - window.held.size()));
            m_output->write("  => " + terminal_text(merged) + "\n\n");
            return;
        }
        Json line;
        line["preview"] = window_id(rule.name, window);
        line["merged"] = Json::parse(merged);
        line["members"] = Json::array();
        for (const auto& member : window.held)
            line["members"].push_back(Json::parse(member));
        if (window.count > window.held.size())
            line["members_more"] = window.count - window.held.size();
        m_output->write_record(json_report_text(line.dump())); // a report: read on terminals
    }

    // Output first, then the store: with -o the open windows, the output
    // sizes and the records done commit together.
    void commit() {
        m_outputs.flush();
        m_since_commit = 0;
        if (!m_outputs.owned()) return;
        save_windows();
        m_outputs.checkpoint(m_store->checkpoints(), m_run.records_done(), carried_counts());
        m_store->commit();
    }

    void save_windows() {
        auto changes = m_merger.drain_changes();
        store::WindowChanges saved;
        saved.saved = std::move(changes.saved);
        saved.removed = std::move(changes.removed);
        saved.meta = std::move(changes.meta);
        m_store->open_windows().save_windows(m_outputs.checkpoint_name(), saved);
    }

    void finish() {
        m_outputs.flush();
        if (m_outputs.owned()) {
            m_outputs.finish(m_store->checkpoints(), m_run.records_done(), carried_counts());
            m_store->open_windows().clear_windows(m_outputs.checkpoint_name());
            m_store->commit();
        }
        m_run.flush_rejects();
    }

    // What this run counted that a run resuming it carries on from.
    store::RunCounts carried_counts() const {
        return store::only_named(summarize({}).summary.counts,
                                 {"merged", "merged_away", "out", "bypassed", "late", "unmatched",
                                  "unkeyed", "rejected"});
    }

    // This run's own counts (add_carried() makes them the whole input's).
    MergeResult summarize(std::chrono::steady_clock::time_point start) const {
        MergeResult result;
        auto& summary = result.summary;
        summary.command = "merge";
        RuleCounts total;
        for (const auto& counts : m_counts) {
            total.merged += counts.merged;
            total.out += counts.out;
            total.late += counts.late;
        }
        result.late = total.late;
        summary.counts = {{"in", m_run.records()}};
        if (m_run.resume_point() > 0) summary.counts.emplace_back("resumed", m_run.skipped());
        if (m_restored > 0) summary.counts.emplace_back("restored_windows", m_restored);
        summary.counts.emplace_back("merged", total.merged);
        summary.counts.emplace_back("merged_away",
                                    total.merged > total.out ? total.merged - total.out : 0);
        summary.counts.emplace_back(m_options.preview ? "would_be_out" : "out", total.out);
        summary.counts.emplace_back("bypassed", m_bypassed);
        summary.counts.emplace_back("late", total.late);
        summary.counts.emplace_back("unmatched", m_unmatched_count);
        if (m_options.missing == MissingGroup::pass)
            summary.counts.emplace_back("unkeyed", m_unkeyed);
        summary.counts.emplace_back("rejected", m_run.rejects().count());
        summary.counts.emplace_back("peak_open_windows", m_merger.peak_open());
        summary.counts.emplace_back("peak_open_bytes", m_merger.peak_open_bytes());
        auto in = m_run.records();
        summary.ratios.emplace_back(
            "drop_rate",
            in == 0 ? 0.0
                    : static_cast<double>(total.merged > total.out ? total.merged - total.out : 0) /
                          static_cast<double>(in));
        if (m_options.rules.size() > 1 || !m_options.rules.front().name.empty()) {
            summary.parts_name = "rule";
            for (std::size_t i = 0; i < m_counts.size(); ++i) {
                const auto& counts = m_counts[i];
                io::Summary::Part part;
                part.name = m_options.rules[i].name;
                part.counts = {{"in", counts.in},
                               {"merged", counts.merged},
                               {"out", counts.out},
                               {"late", counts.late},
                               {"rejected", counts.rejected}};
                auto away = counts.merged > counts.out ? counts.merged - counts.out : 0;
                part.counts.insert(part.counts.begin() + 2, {"merged_away", away});
                part.counts.insert(part.counts.begin() + 4, {"bypassed", counts.bypassed});
                part.ratios.emplace_back("drop_rate", counts.in == 0
                                                          ? 0.0
                                                          : static_cast<double>(away) /
                                                                static_cast<double>(counts.in));
                summary.parts.push_back(std::move(part));
            }
        }
        if (m_outputs.owned()) summary.facts.emplace_back("store", m_store->describe());
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const MergeRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<store::Store> m_store;
    store::OwnedOutputs m_outputs;
    io::Sink* m_output;
    io::Sink* m_late;
    bool m_collision_warned = false;
    io::Sink* m_unmatched;
    io::Sink* m_members;
    Merger m_merger;
    Run m_run;
    std::vector<RuleCounts> m_counts;
    Renderer m_renderer;
    std::vector<std::string> m_ids; // the windows a member joined (with --members)
    BlockResult* m_block = nullptr;
    Timestamp m_block_now;
    std::string m_member;
    std::uint64_t m_since_commit = 0;
    std::uint64_t m_bypassed = 0, m_unmatched_count = 0, m_unkeyed = 0, m_restored = 0;
    std::size_t m_previewed = 0;
};

} // namespace

MergeResult run_merge(const MergeRunOptions& options, io::Sink& standard_output,
                      io::Diagnostics& diagnostics) {
    return MergeRun(options, standard_output, diagnostics).run();
}

} // namespace idem::merge
