// idem dedup over a stream of records (docs/dedup.md).

#include "idem/dedup/run.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/block_pipeline.hpp"
#include "idem/store/store.hpp"

#include <filesystem>
#include <fmt/format.h>

namespace idem::dedup {

namespace {

constexpr std::uint64_t k_progress_every = 1 << 16;

// What a worker found for one line; the ordered stage acts on it.
struct Outcome {
    enum class Kind { too_long, failed_to_parse, bad_time, missing_key, keyed };
    io::BlockLine line;
    Kind kind = Kind::keyed;
    std::uint64_t column = 0;
    std::string message; // failed_to_parse, bad_time; the path for missing_key
    Fingerprint fingerprint;
    std::optional<Timestamp> event_time; // none: the time it was read
    bool has_annotations = false;
    std::string encoded_key; // with --print-key
};

struct BlockOutcome {
    std::vector<Outcome> outcomes;
    std::uint64_t lines = 0;
};

struct WorkerState {
    record::RecordParser parser;
    Fingerprinter fingerprinter;
    explicit WorkerState(const KeySpec& spec) : fingerprinter(spec) {}
};

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

BlockOutcome judge_block(const record::InputBlock& block, WorkerState& state,
                         const DedupRunOptions& options) {
    BlockOutcome result;
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        judge_line(*line, outcome, state, options);
    }
    result.lines = cursor.lines_seen();
    return result;
}

// `"dedup":{...}` for the _idem annotation.
void append_annotation(std::string& out, const Outcome& outcome,
                       const store::FingerprintResult* claim) {
    out += "\"dedup\":{";
    bool first = true;
    auto separator = [&] {
        if (!first) out += ',';
        first = false;
    };
    if (claim) {
        separator();
        fmt::format_to(std::back_inserter(out),
                       "\"fingerprint\":\"{}\",\"first_seen\":\"{}\",\"seen_count\":{}",
                       outcome.fingerprint.hex(), format_rfc3339(claim->first_seen),
                       claim->seen_count);
        if (!claim->first) {
            out += ",\"duplicate_of\":";
            record::append_json_string(
                out, fmt::format("{}:{}", claim->first_source, claim->first_line));
        }
    }
    if (!outcome.encoded_key.empty()) {
        separator();
        out += "\"key\":";
        record::append_json_string(out, outcome.encoded_key);
    }
    out += '}';
}

void write_line(io::Sink& sink, std::string_view bytes) {
    sink.write(bytes);
    sink.write("\n");
    sink.count_record();
}

void write_annotated(io::Sink& sink, std::string_view line, bool has_idem,
                     std::string_view member) {
    sink.write(record::annotate(line, has_idem, member));
    sink.write("\n");
    sink.count_record();
}

} // namespace

namespace {

// Where a run that owns its files keeps its checkpoint in the store.
std::string checkpoint_name(const DedupRunOptions& options) {
    std::error_code ignored;
    auto absolute =
        std::filesystem::absolute(options.output_path, ignored).lexically_normal().string();
    return fmt::format("dedup {} {}", options.scope, absolute);
}

// A file idem owns: created anew, or cut back to what the checkpoint committed.
std::unique_ptr<io::Sink> open_owned(const std::string& path,
                                     const std::optional<store::Checkpoint>& checkpoint,
                                     const std::string& role) {
    if (path.empty()) return nullptr;
    if (!checkpoint) return io::Sink::create_file(path);
    auto committed = checkpoint->file_bytes.find(role);
    return io::Sink::resume_file(path,
                                 committed == checkpoint->file_bytes.end() ? 0 : committed->second);
}

} // namespace

DedupResult run_dedup(const DedupRunOptions& options, io::Sink& standard_output,
                      io::Diagnostics& diagnostics) {
    auto start = std::chrono::steady_clock::now();
    auto location = store::parse_store_uri(options.store_uri);
    location.lock_timeout = options.lock_timeout;
    std::string store_name = location.describe();
    std::unique_ptr<store::Store> store;
    // --on-store-error pass: without a store, every record goes through as
    // new, unclaimed, and the summary says how many.
    auto lose_store = [&](const StoreError& error) {
        if (options.on_store_error == StoreFailure::fail) throw error;
        diagnostics.warning(
            {}, fmt::format("{}; letting records through unclaimed (--on-store-error pass)",
                            error.what()));
        store.reset();
    };
    try {
        store = store::open_store(location);
    } catch (const StoreError& error) {
        lose_store(error);
    }
    std::unique_ptr<io::Sink> reject_sink;
    if (!options.reject_path.empty()) reject_sink = io::Sink::create_file(options.reject_path);

    // With -o, a checkpoint left by a killed run says how far it got.
    bool owns_output = !options.output_path.empty();
    std::optional<store::Checkpoint> checkpoint;
    std::string checkpoint_key;
    if (owns_output && store) {
        checkpoint_key = checkpoint_name(options);
        checkpoint = store->load_checkpoint(checkpoint_key);
        if (checkpoint)
            diagnostics.warning(
                {options.output_path, 0, 0, 0},
                fmt::format("resuming a run that stopped after {} records: the output is cut "
                            "back to what it had committed",
                            checkpoint->records_done));
    }
    auto owned_output = open_owned(options.output_path, checkpoint, "output");
    io::Sink& output = owned_output ? *owned_output : standard_output;
    auto dups_sink = owns_output ? open_owned(options.dups_path, checkpoint, "dups")
                                 : open_owned(options.dups_path, std::nullopt, "dups");
    std::uint64_t skip = checkpoint ? checkpoint->records_done : 0;

    record::RejectRouter rejects(reject_sink.get(), options.strictness, diagnostics,
                                 options.input.max_record_bytes);
    record::InputStream input(options.input, &rejects);
    std::vector<std::unique_ptr<WorkerState>> states;
    for (std::size_t i = 0; i < record::worker_count(options.threads); ++i)
        states.push_back(std::make_unique<WorkerState>(options.key));

    std::uint64_t records = 0, unique = 0, duplicates = 0, unkeyed = 0, unclaimed = 0,
                  since_commit = 0;
    record::PositionTracker positions;
    std::vector<store::FingerprintClaim> claims;
    std::vector<std::size_t> claimed; // outcome index of each claim
    std::string member;

    // Output first, then the store: a crash in between makes a rerun repeat
    // the last batch's records (at-least-once), never lose one; and while
    // the batch's transaction is open, other processes on the store wait.
    // Files idem owns are synced and their sizes committed with the claims,
    // which makes a rerun exact.
    auto commit = [&] {
        output.flush();
        if (dups_sink) dups_sink->flush();
        if (!store) return;
        if (owns_output) {
            output.sync();
            if (dups_sink) dups_sink->sync();
            store::Checkpoint done;
            // Never behind the run this one resumes: its records are done.
            done.records_done = std::max(records, skip);
            done.file_bytes["output"] = output.size();
            if (dups_sink) done.file_bytes["dups"] = dups_sink->size();
            store->save_checkpoint(checkpoint_key, done);
        }
        store->commit();
        since_commit = 0;
    };

    auto emit = [&](const record::InputBlock& block, BlockOutcome& result) {
        positions.start_block(block);
        auto now = now_utc();
        claims.clear();
        claimed.clear();
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            const auto& outcome = result.outcomes[i];
            if (outcome.kind != Outcome::Kind::keyed || records + i < skip) continue;
            auto record = positions.locate(block, outcome.line);
            store::FingerprintClaim claim;
            claim.fingerprint = outcome.fingerprint.bytes;
            claim.event_time = outcome.event_time.value_or(now);
            claim.window = options.window;
            claim.expires_at = now + options.ttl;
            claim.source = *record.source;
            claim.line = record.line;
            claims.push_back(claim);
            claimed.push_back(i);
        }
        std::vector<store::FingerprintResult> answers;
        if (store) {
            try {
                answers = store->claim_fingerprints(options.scope, claims, now);
            } catch (const StoreError& error) {
                lose_store(error);
            }
        }
        if (!store) {
            unclaimed += claims.size();
            answers.assign(claims.size(), store::FingerprintResult{});
            for (std::size_t i = 0; i < claims.size(); ++i)
                answers[i].first_seen = claims[i].event_time;
        }
        std::size_t next_claim = 0;
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            auto& outcome = result.outcomes[i];
            ++records;
            if (records % k_progress_every == 0) diagnostics.progress(records, input.bytes_read());
            if (records <= skip) continue; // done by the run this one resumes
            auto record = positions.locate(block, outcome.line);
            switch (outcome.kind) {
            case Outcome::Kind::too_long:
                record.oversized_bytes = record.bytes.size();
                rejects.reject_oversized(record);
                continue;
            case Outcome::Kind::failed_to_parse:
            case Outcome::Kind::bad_time:
                rejects.reject(record, outcome.column, outcome.message);
                continue;
            case Outcome::Kind::missing_key:
                if (options.missing == MissingKey::reject) {
                    rejects.reject(record, 0,
                                   fmt::format("missing key field '{}'", outcome.message));
                    continue;
                }
                ++unkeyed;
                if (options.action != DuplicateAction::count) write_line(output, record.bytes);
                continue;
            case Outcome::Kind::keyed:
                break;
            }
            const auto& answer = answers[next_claim++];
            bool duplicate = answer.seen_count > options.allow;
            duplicate ? ++duplicates : ++unique;
            bool annotate =
                options.action == DuplicateAction::mark || options.print_key == KeyPrinting::on;
            if (options.action == DuplicateAction::count) continue;
            member.clear();
            if (annotate || (duplicate && dups_sink)) append_annotation(member, outcome, &answer);
            io::Sink* target = &output;
            if (duplicate && options.action == DuplicateAction::drop) target = dups_sink.get();
            if (target == nullptr) continue;
            if (annotate || target == dups_sink.get())
                write_annotated(*target, record.bytes, outcome.has_annotations, member);
            else
                write_line(*target, record.bytes);
        }
        if (auto oversized = positions.finish_block(block, result.lines)) {
            ++records;
            if (records > skip) rejects.reject_oversized(*oversized);
        }
        // Records skipped on a resume are not new work: no commit for them.
        if (records > skip) since_commit += result.outcomes.size();
        if (since_commit >= options.batch) commit();
    };

    try {
        record::run_block_pipeline<WorkerState, BlockOutcome>(
            input, states,
            [&](const record::InputBlock& block, WorkerState& state) {
                return judge_block(block, state, options);
            },
            emit);
    } catch (const InputError&) {
        // What was decided before the failure stands.
        commit();
        throw;
    }
    // The last batch, and no checkpoint: a finished run leaves none, so the
    // next run with the same -o starts a new file.
    output.flush();
    if (dups_sink) dups_sink->flush();
    if (store && owns_output) {
        output.sync();
        if (dups_sink) dups_sink->sync();
        store->clear_checkpoint(checkpoint_key);
    }
    if (store) store->commit();
    if (reject_sink) reject_sink->flush();

    DedupResult result;
    result.duplicates = duplicates;
    auto& summary = result.summary;
    summary.command = "dedup";
    summary.counts = {{"in", records}};
    if (skip > 0) summary.counts.emplace_back("resumed", std::min(skip, records));
    summary.counts.emplace_back("unique", unique);
    summary.counts.emplace_back("duplicates", duplicates);
    if (options.missing == MissingKey::pass) summary.counts.emplace_back("unkeyed", unkeyed);
    summary.counts.emplace_back("rejected", rejects.count());
    summary.counts.emplace_back("out", output.records_written());
    if (dups_sink) summary.counts.emplace_back("dups_file", dups_sink->records_written());
    if (options.on_store_error == StoreFailure::pass)
        summary.counts.emplace_back("unclaimed", unclaimed);
    summary.facts.emplace_back("store", store_name);
    summary.seconds = io::seconds_since(start);
    return result;
}

io::Summary collect_garbage(const std::string& store_uri) {
    auto start = std::chrono::steady_clock::now();
    auto store = store::open_store(store::parse_store_uri(store_uri));
    io::Summary summary;
    summary.command = "dedup --gc";
    summary.counts = {{"removed", store->collect_garbage(now_utc())}};
    summary.facts.emplace_back("store", store->describe());
    summary.seconds = io::seconds_since(start);
    return summary;
}

} // namespace idem::dedup
