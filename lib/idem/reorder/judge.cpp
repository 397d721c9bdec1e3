// reorder's worker side: parse each line of a block, read its partition and
// order key.

#include "idem/reorder/detail/judge.hpp"

#include "idem/order/order_key.hpp"
#include "idem/record/event_time.hpp"
#include "idem/run/record_run.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>

namespace idem::reorder::detail {

namespace {

void set_aside(BlockOutcome& result, Outcome& outcome, Outcome::Kind kind, std::uint64_t column,
               std::string message) {
    outcome.kind = kind;
    result.failures.push_back({result.outcomes.size() - 1, column, std::move(message)});
}

void describe_bad(BlockOutcome& result, Outcome& outcome, const record::FieldPath& path,
                  const std::optional<record::FieldValue>& value, std::string_view expected) {
    set_aside(result, outcome, Outcome::Kind::bad_field, 0,
              value ? fmt::format("field '{}' is not {}", path.text(), expected)
                    : fmt::format("missing field '{}'", path.text()));
}

void judge_line(const io::BlockLine& line, Outcome& outcome, BlockOutcome& result,
                WorkerState& state, const ReorderRunOptions& options) {
    if (line.bytes.size() > options.input.max_record_bytes) {
        outcome.kind = Outcome::Kind::too_long;
        return;
    }
    auto& parser = state.parser;
    if (auto failure = parser.parse(line.bytes))
        return set_aside(result, outcome, Outcome::Kind::failed_to_parse, failure->column,
                         std::move(failure->message));
    if (options.sequence_field) {
        std::optional<record::FieldValue> value;
        auto sequence = order::find_sequence(parser, *options.sequence_field, value);
        if (!sequence)
            return describe_bad(result, outcome, *options.sequence_field, value,
                                "a sequence number (an integer from 0 to 2^63-2)");
        outcome.key = {*sequence, 0};
    } else if (options.order_by) {
        auto value = parser.find(*options.order_by);
        auto stamp = value ? order::parse_stamp(*value) : std::nullopt;
        if (!stamp)
            return describe_bad(result, outcome, *options.order_by, value,
                                "a time (RFC 3339, epoch number, or <physical>.<logical>)");
        auto limit = std::chrono::duration_cast<std::chrono::microseconds>(
                         (options.now + options.max_future).time_since_epoch())
                         .count();
        if (stamp->primary > limit)
            return set_aside(
                result, outcome, Outcome::Kind::bad_field, 0,
                fmt::format("field '{}' is more than --max-future {} ahead of the clock ({}): it "
                            "would move the watermark past every other record",
                            options.order_by->text(), format_duration(options.max_future),
                            format_rfc3339(options.now)));
        outcome.key = *stamp;
    }
    if (options.time_field || options.input.window.active()) {
        const auto* time_field = options.time_field ? &*options.time_field : nullptr;
        auto time = record::event_time(parser, time_field);
        if (time.failed())
            return set_aside(result, outcome, Outcome::Kind::bad_field, 0,
                             record::describe_failure(time, *options.time_field));
        if (!run::placed_in_window(options.input.window, time, outcome, [&](std::string why) {
                set_aside(result, outcome, Outcome::Kind::bad_field, 0, std::move(why));
            }))
            return;
        if (time_field) outcome.event_time = *time.time;
    }
    auto& partitions = result.partitions;
    auto offset = partitions.size();
    if (const auto* missing =
            order::encode_partition(parser, options.partition_fields, partitions)) {
        partitions.resize(offset);
        return set_aside(result, outcome, Outcome::Kind::bad_field, 0,
                         fmt::format("missing partition field '{}'", missing->text()));
    }
    outcome.partition_offset = static_cast<std::uint32_t>(offset);
    outcome.partition_size = static_cast<std::uint32_t>(partitions.size() - offset);
}

} // namespace

void judge_block(const run::InputBlock& block, WorkerState& state, const ReorderRunOptions& options,
                 BlockOutcome& result) {
    // Exactly one outcome per line: no growth, no slack (small records make
    // tens of thousands per block).
    auto lines = block.block.lines();
    result.outcomes.reserve(static_cast<std::size_t>(std::count(lines.begin(), lines.end(), '\n')) +
                            1);
    io::LineCursor cursor(lines);
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        judge_line(*line, outcome, result, state, options);
    }
    result.lines = cursor.lines_seen();
}

} // namespace idem::reorder::detail
