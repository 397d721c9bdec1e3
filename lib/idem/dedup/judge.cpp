// dedup's worker side: parse, time and fingerprint each line of a block.

#include "idem/dedup/detail/judge.hpp"

#include "idem/record/event_time.hpp"
#include "idem/util/time_zone.hpp"

#include <fmt/format.h>

namespace idem::dedup::detail {

namespace {

void judge_line(const io::BlockLine& line, Outcome& outcome, WorkerState& state,
                const DedupRunOptions& options) {
    auto& parser = state.parser;
    if (!run::parse_line(line, options.input.max_record_bytes, parser, outcome)) return;
    outcome.has_annotations = parser.has_annotations();
    auto time = record::event_time(parser, options.time_field ? &*options.time_field : nullptr,
                                   &options.zone);
    if (time.failed()) {
        outcome.kind = Outcome::Kind::bad_time;
        outcome.message = record::describe_failure(time, *options.time_field);
        return;
    }
    if (!run::placed_in_window(options.input.window, time, outcome, [&](std::string why) {
            outcome.kind = Outcome::Kind::bad_time;
            outcome.message = std::move(why);
        }))
        return;
    outcome.event_time = time.time;
    std::string bucket;
    if (options.bucket)
        bucket =
            calendar_bucket(outcome.event_time.value_or(now_utc()), options.zone, *options.bucket);
    auto key = state.fingerprinter.fingerprint(parser, bucket);
    if (options.print_key == KeyPrinting::on || !options.counts_path.empty())
        outcome.encoded_key = state.fingerprinter.encoded_key();
    if (!key.fingerprint) {
        outcome.kind = Outcome::Kind::missing_key;
        outcome.message = std::move(key.missing_path);
        return;
    }
    outcome.fingerprint = *key.fingerprint;
}

} // namespace

void judge_block(const run::InputBlock& block, WorkerState& state, const DedupRunOptions& options,
                 BlockOutcome& result) {
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
