// What a merge worker finds for one line (detail/judge.hpp).

#include "idem/merge/detail/judge.hpp"

#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/run/record_run.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::merge::detail {

namespace {

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
    if (!run::placed_in_window(options.input.window, time, outcome, [&](std::string why) {
            outcome.kind = Outcome::Kind::bad_field;
            outcome.message = std::move(why);
        }))
        return;
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

} // namespace

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

} // namespace idem::merge::detail
