// dedup's worker side: parse, time and fingerprint each line of a block.

#include "idem/dedup/detail/judge.hpp"

#include "idem/util/time_zone.hpp"

#include <fmt/format.h>

namespace idem::dedup::detail {

namespace {

std::optional<Timestamp> time_of(const record::FieldValue& value) {
    if (value.type == record::FieldValue::Type::string ||
        value.type == record::FieldValue::Type::number)
        return parse_timestamp(value.text);
    return std::nullopt;
}

void judge_line(const io::BlockLine& line, Outcome& outcome, WorkerState& state,
                const DedupRunOptions& options) {
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
    outcome.has_annotations = parser.has_annotations();
    if (options.time_field) {
        auto value = parser.find(*options.time_field);
        outcome.event_time = value ? time_of(*value) : std::nullopt;
        if (!outcome.event_time) {
            outcome.kind = Outcome::Kind::bad_time;
            outcome.message =
                value
                    ? fmt::format("time field '{}' is not a timestamp", options.time_field->text())
                    : fmt::format("missing time field '{}'", options.time_field->text());
            return;
        }
    } else if (parser.shape() == record::RecordShape::envelope &&
               !parser.envelope().received_at.empty()) {
        outcome.event_time = parse_timestamp(parser.envelope().received_at);
    }
    std::string bucket;
    if (options.bucket)
        bucket =
            calendar_bucket(outcome.event_time.value_or(now_utc()), options.zone, *options.bucket);
    auto key = state.fingerprinter.fingerprint(parser, bucket);
    if (options.print_key == KeyPrinting::on)
        outcome.encoded_key = state.fingerprinter.encoded_key();
    if (!key.fingerprint) {
        outcome.kind = Outcome::Kind::missing_key;
        outcome.message = std::move(key.missing_path);
        return;
    }
    outcome.fingerprint = *key.fingerprint;
}

} // namespace

void judge_block(const record::InputBlock& block, WorkerState& state,
                 const DedupRunOptions& options, BlockOutcome& result) {
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        judge_line(*line, outcome, state, options);
    }
    result.lines = cursor.lines_seen();
}

Outcome judge_record(std::string_view bytes, WorkerState& state, const DedupRunOptions& options) {
    Outcome outcome;
    outcome.line.bytes = bytes;
    judge_line(outcome.line, outcome, state, options);
    return outcome;
}

} // namespace idem::dedup::detail
