// reorder's worker side: parse each line of a block, read its partition and
// order key.

#include "idem/reorder/detail/judge.hpp"

#include "idem/reorder/order_key.hpp"

#include <fmt/format.h>

namespace idem::reorder::detail {

namespace {

void describe_bad(Outcome& outcome, const record::FieldPath& path,
                  const std::optional<record::FieldValue>& value, std::string_view expected) {
    outcome.kind = Outcome::Kind::bad_field;
    outcome.message = value ? fmt::format("field '{}' is not {}", path.text(), expected)
                            : fmt::format("missing field '{}'", path.text());
}

void judge_line(const io::BlockLine& line, Outcome& outcome, std::string& partitions,
                WorkerState& state, const ReorderRunOptions& options) {
    if (line.bytes.size() > options.input.max_record_bytes) {
        outcome.kind = Outcome::Kind::too_long;
        return;
    }
    auto& parser = state.parser;
    if (auto failure = parser.parse(line.bytes)) {
        outcome.kind = Outcome::Kind::failed_to_parse;
        outcome.column = failure->column;
        outcome.message = std::move(failure->message);
        return;
    }
    if (options.sequence_field) {
        auto value = parser.find(*options.sequence_field);
        auto sequence = value ? parse_sequence(*value) : std::nullopt;
        if (!sequence)
            return describe_bad(outcome, *options.sequence_field, value,
                                "a sequence number (an integer from 0 to 2^63-1)");
        outcome.key = {*sequence, 0};
    } else if (options.order_by) {
        auto value = parser.find(*options.order_by);
        auto stamp = value ? parse_stamp(*value) : std::nullopt;
        if (!stamp)
            return describe_bad(outcome, *options.order_by, value,
                                "a time (RFC 3339, epoch number, or <physical>.<logical>)");
        outcome.key = *stamp;
    }
    if (options.time_field) {
        auto value = parser.find(*options.time_field);
        outcome.event_time = value && (value->type == record::FieldValue::Type::string ||
                                       value->type == record::FieldValue::Type::number)
                                 ? parse_timestamp(value->text)
                                 : std::nullopt;
        if (!outcome.event_time)
            return describe_bad(outcome, *options.time_field, value, "a timestamp");
    }
    auto offset = partitions.size();
    if (const auto* missing = encode_partition(parser, options.partition_fields, partitions)) {
        partitions.resize(offset);
        outcome.kind = Outcome::Kind::bad_field;
        outcome.message = fmt::format("missing partition field '{}'", missing->text());
        return;
    }
    outcome.partition_offset = static_cast<std::uint32_t>(offset);
    outcome.partition_size = static_cast<std::uint32_t>(partitions.size() - offset);
}

} // namespace

BlockOutcome judge_block(const record::InputBlock& block, WorkerState& state,
                         const ReorderRunOptions& options) {
    BlockOutcome result;
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        judge_line(*line, outcome, result.partitions, state, options);
    }
    result.lines = cursor.lines_seen();
    return result;
}

} // namespace idem::reorder::detail
