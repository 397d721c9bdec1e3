// What a worker thread of `idem states` reads from each record: the entity,
// state, operation, order key and time, into the block's texts.

#include "idem/states/detail/worker.hpp"
#include "idem/order/order_key.hpp"
#include "idem/record/event_time.hpp"
#include "idem/run/record_run.hpp"
#include "idem/util/key_index.hpp"

#include <fmt/format.h>

namespace idem::states::detail {

namespace {

// A field's text into `texts`: strings unescaped, numbers as written.
bool take_text(record::RecordParser& parser, const record::FieldPath& path, std::string& texts,
               std::uint32_t& at, std::uint32_t& size, std::string& problem,
               std::string_view what) {
    auto value = parser.find(path);
    if (!value) {
        problem = fmt::format("missing {} field '{}'", what, path.text());
        return false;
    }
    if (value->type != record::FieldValue::Type::string &&
        value->type != record::FieldValue::Type::number) {
        problem = fmt::format("{} field '{}' is not a string or a number", what, path.text());
        return false;
    }
    at = static_cast<std::uint32_t>(texts.size());
    texts.append(value->text);
    size = static_cast<std::uint32_t>(value->text.size());
    return true;
}

void judge_line(const io::BlockLine& line, Outcome& outcome, BlockResult& result,
                WorkerState& state, const StatesRunOptions& options, const Checker& checker) {
    auto& parser = state.parser;
    if (!run::parse_line(line, options.input.max_record_bytes, parser, outcome)) return;
    outcome.has_annotations = parser.has_annotations();
    auto& texts = result.texts;
    auto start = texts.size();
    auto fail = [&](std::string message) {
        texts.resize(start);
        outcome.kind = Outcome::Kind::bad_field;
        outcome.message = std::move(message);
    };
    std::string problem;
    if (!take_text(parser, options.entity_field, texts, outcome.entity_at, outcome.entity_size,
                   problem, "entity") ||
        !take_text(parser, options.state_field, texts, outcome.state_at, outcome.state_size,
                   problem, "state"))
        return fail(std::move(problem));
    if (outcome.state_size == 0)
        return fail(fmt::format("state field '{}' is empty", options.state_field.text()));
    if (outcome.entity_size == 0)
        return fail(fmt::format("entity field '{}' is empty", options.entity_field.text()));
    outcome.entity_hash =
        KeyIndex::hash_of(std::string_view(texts).substr(outcome.entity_at, outcome.entity_size));
    outcome.state_id = checker.declared_state(
        std::string_view(texts).substr(outcome.state_at, outcome.state_size));
    if (options.operation_field) {
        if (auto value = parser.find(*options.operation_field)) {
            outcome.operation_at = static_cast<std::uint32_t>(texts.size());
            texts.append(value->text);
            outcome.operation_size = static_cast<std::uint32_t>(value->text.size());
        }
    }
    if (options.order_field) {
        if (options.order_by == OrderBy::version) {
            std::optional<record::FieldValue> value;
            auto version = order::find_sequence(parser, *options.order_field, value);
            if (!version)
                return fail(
                    value ? fmt::format("version field '{}' is not an integer from 0 to "
                                        "2^63-2",
                                        options.order_field->text())
                          : fmt::format("missing version field '{}'", options.order_field->text()));
            outcome.version = *version;
            outcome.key = {*version, 0};
        } else {
            auto value = parser.find(*options.order_field);
            auto stamp = value ? order::parse_stamp(*value) : std::nullopt;
            if (!stamp)
                return fail(
                    value ? fmt::format("order field '{}' is not a time (RFC 3339, "
                                        "epoch, or <physical>.<logical>)",
                                        options.order_field->text())
                          : fmt::format("missing order field '{}'", options.order_field->text()));
            outcome.key = *stamp;
        }
    }
    auto time = record::event_time(parser, options.time_field ? &*options.time_field : nullptr);
    if (time.failed()) return fail(record::describe_failure(time, *options.time_field));
    if (!run::placed_in_window(options.input.window, time, outcome, fail)) return;
    outcome.time = time.time;
    if (!outcome.time && options.order_by != OrderBy::arrival &&
        options.order_by != OrderBy::version)
        outcome.time = Timestamp(Duration(outcome.key.primary)); // the order stamp's physical time
    outcome.kind = Outcome::Kind::event;
}

} // namespace

void judge_block(const run::InputBlock& block, WorkerState& state, const StatesRunOptions& options,
                 const Checker& checker, BlockResult& result) {
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        judge_line(*line, outcome, result, state, options, checker);
    }
    result.lines = cursor.lines_seen();
}

} // namespace idem::states::detail
