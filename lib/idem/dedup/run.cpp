// idem dedup over a stream of records (docs/dedup.md).

#include "idem/dedup/run.hpp"

#include "idem/dedup/detail/judge.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/block_pipeline.hpp"
#include "idem/store/owned_files.hpp"
#include "idem/store/store.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>
#include <unordered_map>

namespace idem::dedup {

namespace {

using detail::BlockOutcome;
using detail::Outcome;
using detail::WorkerState;

// `"dedup":{...}` for the _idem annotation.
// Whether a record was judged by the shared store or, after it failed
// (--on-store-error pass|local), only within this process.
enum class Judged { by_store, in_process };

void append_annotation(std::string& out, const Outcome& outcome,
                       const store::FingerprintResult* claim, Judged judged = Judged::by_store) {
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
    if (judged == Judged::in_process) {
        separator();
        out += "\"degraded\":true";
    }
    out += '}';
}

} // namespace

namespace {

using store::open_owned;

// One record on its way to the store, kept whole while --keep last holds it.
struct Copy {
    std::string bytes;
    Outcome outcome;
    store::FingerprintClaim claim; // its source view points into `source`
    std::string source;
    std::uint64_t row_id = 0; // with -o, its row among the held rows in the store
};

// With -o, each held copy is also a row in the store (reorder's held-record
// table, under a scope of its own), committed with the checkpoint: a resumed
// run holds again exactly what the killed one held, so -o stays exact.
store::HeldRecordRow row_of(const Copy& copy) {
    store::HeldRecordRow row;
    row.id = copy.row_id;
    row.partition = copy.outcome.fingerprint.hex() + ' ' + copy.source;
    row.key.primary = copy.claim.event_time.time_since_epoch().count();
    row.key.secondary = copy.claim.line;
    row.arrival = copy.claim.event_time;
    row.bytes = copy.bytes;
    return row;
}

// --keep last: every copy of a fingerprint, until its window closes (or the
// input ends), when the newest is the one emitted.
struct HeldCopies {
    std::vector<Copy> copies;
    std::uint64_t order = 0;
};

// The ordered stage of a dedup run: everything with side effects happens
// here, on the calling thread, in input order.
class DedupRun {
public:
    DedupRun(const DedupRunOptions& options, io::Sink& standard_output,
             io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics) {
        open_store();
        if (!options.reject_path.empty())
            m_reject_sink = io::Sink::create_file(options.reject_path);
        open_outputs(standard_output);
        m_rejects.emplace(m_reject_sink.get(), options.strictness, diagnostics,
                          options.input.max_record_bytes);
        m_input.emplace(options.input, &*m_rejects);
    }

    DedupResult run() {
        auto start = std::chrono::steady_clock::now();
        std::vector<std::unique_ptr<WorkerState>> states;
        for (std::size_t i = 0; i < record::worker_count(m_options.threads); ++i)
            states.push_back(std::make_unique<WorkerState>(m_options.key));
        try {
            record::run_block_pipeline<WorkerState, BlockOutcome>(
                *m_input, states,
                [&](const record::InputBlock& block, WorkerState& state, BlockOutcome& result) {
                    judge_block(block, state, m_options, result);
                },
                [&](const record::InputBlock& block, BlockOutcome& result) {
                    emit_block(block, result);
                },
                // Live input gone quiet (tail -f): what was decided goes out
                // now instead of waiting for a full batch.
                [&] {
                    if (m_since_commit > 0) commit();
                });
        } catch (const InputError&) {
            commit(); // what was decided before the failure stands
            throw;
        }
        release_held(Timestamp::max());
        finish();
        note_earlier_runs();
        return summarize(start);
    }

private:
    void open_store() {
        auto location = store::parse_store_uri(m_options.store_uri);
        location.lock_timeout = m_options.lock_timeout;
        m_store_name = location.describe();
        try {
            m_store = store::open_store(location);
        } catch (const StoreError& error) {
            lose_store(error);
        }
    }

    // --on-store-error pass|local: the run goes on with a store in this
    // process, so repeats within it are still caught; what it judges is
    // counted apart (unclaimed, or degraded), and with local written back
    // to the shared store at the end. The batch claimed in the failed store
    // since its last commit is claimed again here: its records are out.
    void lose_store(const StoreError& error) {
        if (m_options.on_store_error == StoreFailure::fail) throw error;
        bool local = m_options.on_store_error == StoreFailure::local;
        m_diagnostics.warning(
            {},
            fmt::format("{}; judging within this process from here on ({}){}", error.what(),
                        local ? "--on-store-error local" : "--on-store-error pass",
                        local ? ": what it claims is written back when the store answers" : ""));
        m_store_lost = true;
        m_store = store::open_store(store::parse_store_uri(":memory:"));
        if (!m_batch_firsts.empty()) {
            (void)m_store->claim_fingerprints(m_options.scope, m_batch_firsts, now_utc());
            if (local)
                m_local_firsts.insert(m_local_firsts.end(), m_batch_firsts.begin(),
                                      m_batch_firsts.end());
            m_batch_firsts.clear();
        }
    }

    // --on-store-error local, at the end: the fingerprints judged in this
    // process go to the shared store, so later runs and other instances see
    // them. Those another instance claimed meanwhile are counted, not lost.
    void write_back() {
        if (m_options.on_store_error != StoreFailure::local || !m_store_lost) return;
        if (m_local_firsts.empty()) return;
        try {
            auto location = store::parse_store_uri(m_options.store_uri);
            location.lock_timeout = m_options.lock_timeout;
            auto shared = store::open_store(location);
            auto answers = shared->claim_fingerprints(m_options.scope, m_local_firsts, now_utc());
            shared->commit();
            auto already = std::count_if(answers.begin(), answers.end(),
                                         [](const auto& answer) { return !answer.first; });
            m_diagnostics.warning(
                {}, fmt::format("wrote {} fingerprint{} judged in this process back to {}{}",
                                m_local_firsts.size(), m_local_firsts.size() == 1 ? "" : "s",
                                m_store_name,
                                already > 0 ? fmt::format(" ({} another instance had claimed "
                                                          "meanwhile: emitted twice)",
                                                          already)
                                            : std::string()));
        } catch (const StoreError& error) {
            m_diagnostics.warning(
                {}, fmt::format("cannot write {} fingerprint{} back to {} ({}): a later run will "
                                "not know them",
                                m_local_firsts.size(), m_local_firsts.size() == 1 ? "" : "s",
                                m_store_name, error.what()));
        }
    }

    // With -o, a checkpoint left by a killed run says how far it got.
    void open_outputs(io::Sink& standard_output) {
        m_owns_output = !m_options.output_path.empty();
        std::optional<store::Checkpoint> checkpoint;
        if (m_owns_output && m_store) {
            m_input_identity = store::input_identity(m_options.input.paths);
            auto resumption =
                store::find_resumption(*m_store, "dedup", m_options.scope, m_options.output_path,
                                       m_input_identity, m_diagnostics);
            m_checkpoint_key = std::move(resumption.checkpoint_name);
            checkpoint = std::move(resumption.checkpoint);
        }
        m_owned_output = open_owned(m_options.output_path, checkpoint, "output");
        m_output = m_owned_output ? m_owned_output.get() : &standard_output;
        m_dups = open_owned(m_options.dups_path, m_owns_output ? checkpoint : std::nullopt, "dups");
        m_skip = checkpoint ? checkpoint->records_done : 0;
        if (m_owns_output && m_store) {
            m_held_scope = "dedup held " + m_checkpoint_key;
            if (checkpoint && keeps_last()) restore_held();
        }
    }

    // The copies the run this one resumes held at its last commit, in the
    // order it held them. Nothing is let go here: each of them had a window
    // still open at the watermark then, which no later record lowers.
    void restore_held() {
        WorkerState state(m_options.key);
        auto now = now_utc();
        for (auto& row : m_store->load_held(m_held_scope)) {
            Copy copy;
            auto space = row.partition.find(' ');
            store::FingerprintBytes fingerprint{};
            if (space == std::string::npos ||
                hex_decode_to(std::string_view(row.partition).substr(0, space),
                              reinterpret_cast<char*>(fingerprint.data()),
                              fingerprint.size()) != fingerprint.size())
                throw StoreError(fmt::format("store {}: a held copy of --keep last is unreadable",
                                             m_store_name));
            copy.bytes = std::move(row.bytes);
            copy.source = row.partition.substr(space + 1);
            // Judged again for what the row does not keep (annotations, the
            // printed key); the fingerprint and time are the ones first found.
            copy.outcome = detail::judge_record(copy.bytes, state, m_options);
            copy.outcome.fingerprint.bytes = fingerprint;
            copy.outcome.event_time = row.arrival;
            copy.claim = claim_for(copy.outcome, copy.source, row.key.secondary, now);
            copy.row_id = row.id;
            m_next_row_id = std::max(m_next_row_id, row.id + 1);
            keep(std::move(copy));
        }
    }

    store::FingerprintClaim claim_for(const Outcome& outcome, std::string_view source,
                                      std::uint64_t line, Timestamp now) const {
        store::FingerprintClaim claim;
        claim.fingerprint = outcome.fingerprint.bytes;
        claim.event_time = outcome.event_time.value_or(now);
        claim.window = m_options.window;
        claim.expires_at = now + m_options.ttl;
        claim.source = source;
        claim.line = line;
        return claim;
    }

    store::FingerprintClaim claim_for(const Outcome& outcome, const record::InputRecord& record,
                                      Timestamp now) const {
        return claim_for(outcome, *record.source, record.line, now);
    }

    std::vector<store::FingerprintResult> claim(const std::vector<store::FingerprintClaim>& claims,
                                                Timestamp now) {
        std::vector<store::FingerprintResult> answers;
        try {
            answers = m_store->claim_fingerprints(m_options.scope, claims, now);
        } catch (const StoreError& error) {
            lose_store(error);
            answers = m_store->claim_fingerprints(m_options.scope, claims, now);
        }
        // First copies of this batch: claimed again elsewhere if the store
        // fails before the batch commits, and written back with local. With
        // --on-store-error fail (the default) nothing survives a failure:
        // nothing is kept, and the claim path pays nothing for it.
        if (m_options.on_store_error == StoreFailure::fail) return answers;
        for (std::size_t i = 0; i < claims.size(); ++i) {
            if (!answers[i].first) continue;
            if (!m_store_lost)
                m_batch_firsts.push_back(claims[i]);
            else if (m_options.on_store_error == StoreFailure::local)
                m_local_firsts.push_back(claims[i]);
        }
        return answers;
    }

    // The block's memory is reused once this returns, by an exception too:
    // the records written from it in place go out before.
    void emit_block(const record::InputBlock& block, BlockOutcome& result) {
        try {
            emit_records(block, result);
        } catch (...) {
            try {
                m_output->release_in_place();
            } catch (const FileSystemError&) {
                // the error already on its way is the one to report
            }
            throw;
        }
        m_output->release_in_place();
    }

    void emit_records(const record::InputBlock& block, BlockOutcome& result) {
        if (m_records == 0) expect_records(block, result);
        m_positions.start_block(block);
        auto now = now_utc();
        // Claims for the whole block in one call: one round trip to Redis,
        // one pass over the SQLite log's index.
        auto& claims = m_block_claims; // kept for its capacity
        claims.clear();
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            const auto& outcome = result.outcomes[i];
            if (outcome.kind != Outcome::Kind::keyed || m_records + i < m_skip || keeps_last())
                continue;
            claims.push_back(claim_for(outcome, m_positions.locate(block, outcome.line), now));
        }
        auto answers = claim(claims, now);
        std::size_t next_answer = 0;
        for (auto& outcome : result.outcomes) {
            ++m_records;
            if (m_records % record::k_progress_every == 0)
                m_diagnostics.progress(m_records, m_input->bytes_read());
            if (m_records <= m_skip) continue; // done by the run this one resumes
            auto record = m_positions.locate(block, outcome.line);
            if (!set_aside(outcome, record)) continue;
            if (keeps_last())
                hold(outcome, record, now);
            else {
                const auto& answer = answers[next_answer++];
                if (!answer.first) note_first_copy(answer, record);
                route(outcome, record.bytes, answer,
                      outcome.line.newline_follows ? InPlace::yes : InPlace::no);
            }
        }
        if (auto oversized = m_positions.finish_block(block, result.lines)) {
            ++m_records;
            if (m_records > m_skip) m_rejects->reject_oversized(*oversized);
        }
        // Records skipped on a resume are not new work: no commit for them.
        if (m_records > m_skip) m_since_commit += result.outcomes.size();
        if (m_since_commit >= m_options.batch) commit();
    }

    // From the first block's records per byte and the input's size: the
    // store's table is then sized once (the table caps what it reserves).
    void expect_records(const record::InputBlock& block, const BlockOutcome& first) {
        auto total = m_input->total_bytes();
        auto block_bytes = block.block.lines().size();
        if (!m_store || !total || block_bytes == 0 || first.outcomes.empty()) return;
        auto expected = static_cast<std::uint64_t>(static_cast<double>(*total) /
                                                   static_cast<double>(block_bytes) *
                                                   static_cast<double>(first.outcomes.size()));
        m_store->expect_fingerprints(m_options.scope, expected);
    }

    // A repeat whose first copy this run never read (another input, or this
    // record itself at the same line) was first seen by an earlier run.
    void note_first_copy(const store::FingerprintResult& answer,
                         const record::InputRecord& record) {
        if (answer.first_source.empty()) return;
        if (m_sources_read.empty() || m_sources_read.back() != *record.source)
            m_sources_read.push_back(*record.source);
        bool earlier = answer.first_source == *record.source
                           ? answer.first_line >= record.line
                           : std::find(m_sources_read.begin(), m_sources_read.end(),
                                       answer.first_source) == m_sources_read.end();
        if (earlier) ++m_first_seen_earlier;
    }

    void note_earlier_runs() const {
        if (m_first_seen_earlier == 0 || !m_store) return;
        m_diagnostics.warning(
            {}, fmt::format("{} record{} were first seen by an earlier run in {} (scope {}) and "
                            "count as duplicates now; --store :memory: for a fresh run",
                            m_first_seen_earlier, m_first_seen_earlier == 1 ? "" : "s",
                            m_store_name, quote(m_options.scope)));
    }

    // Rejects and unkeyed records; true when the record goes on to the store.
    bool set_aside(const Outcome& outcome, record::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long:
            record.oversized_bytes = record.bytes.size();
            m_rejects->reject_oversized(record);
            return false;
        case Outcome::Kind::failed_to_parse:
        case Outcome::Kind::bad_time:
            m_rejects->reject(record, outcome.column, outcome.message);
            return false;
        case Outcome::Kind::missing_key:
            if (m_options.missing == MissingKey::reject) {
                m_rejects->reject(record, 0,
                                  fmt::format("missing key field '{}'", outcome.message));
                return false;
            }
            ++m_unkeyed;
            if (m_options.action != DuplicateAction::count) m_output->write_record(record.bytes);
            return false;
        case Outcome::Kind::keyed:
            return true;
        }
        return false;
    }

    // Sends a claimed record where the store's answer says.
    // InPlace::yes: `bytes` lies in the block being emitted, followed by its
    // newline, and is written from there.
    enum class InPlace : bool { no, yes };
    void route(const Outcome& outcome, std::string_view bytes,
               const store::FingerprintResult& answer, InPlace in_place = InPlace::no) {
        // --keep last: every copy carries the event's total count, and the
        // newest is the one that is not a duplicate.
        bool duplicate = keeps_last() ? !answer.first : answer.seen_count > m_options.allow;
        if (duplicate)
            ++m_duplicates;
        else if (m_store_lost)
            ++m_unclaimed; // judged within this process only
        else
            ++m_unique;
        if (m_options.action == DuplicateAction::count) return;
        bool annotate =
            m_options.action == DuplicateAction::mark || m_options.print_key == KeyPrinting::on;
        io::Sink* target = m_output;
        if (duplicate && m_options.action == DuplicateAction::drop) target = m_dups.get();
        if (target == nullptr) return;
        if (!annotate && target == m_output) {
            if (in_place == InPlace::yes)
                target->write_record_in_place({bytes.data(), bytes.size() + 1});
            else
                target->write_record(bytes);
            return;
        }
        m_member.clear();
        append_annotation(m_member, outcome, &answer,
                          m_store_lost ? Judged::in_process : Judged::by_store);
        record::write_annotated(*target, bytes, outcome.has_annotations, m_member);
    }

    [[nodiscard]] bool keeps_last() const { return m_options.keep == KeepCopy::last; }

    void hold(const Outcome& outcome, const record::InputRecord& record, Timestamp now) {
        auto event_time = outcome.event_time.value_or(now);
        // Windows that closed before this record are let go first, so that a
        // copy beyond its event's window starts a new event.
        if (event_time > m_watermark) {
            m_watermark = event_time;
            release_held(m_watermark);
        }
        Copy copy;
        copy.bytes.assign(record.bytes);
        copy.outcome = outcome;
        copy.source = *record.source;
        copy.claim = claim_for(outcome, record, now);
        if (!m_held_scope.empty()) {
            copy.row_id = m_next_row_id++;
            m_unsaved_held.emplace(copy.row_id, row_of(copy));
        }
        keep(std::move(copy));
        // The flags were fine; this input holds more than they allow: bad
        // input for this run (exit 3), not a usage error.
        if (m_held_bytes > m_options.max_held_bytes)
            throw InputError(
                {*record.source, record.line, 0, record.byte_offset},
                fmt::format("--keep last holds {} of records here, more than --max-held {}: give "
                            "a --window so that copies are let go as their window closes, or "
                            "raise --max-held",
                            format_bytes(m_held_bytes), format_bytes(m_options.max_held_bytes)));
    }

    void keep(Copy&& copy) {
        auto [slot, inserted] = m_held.try_emplace(copy.outcome.fingerprint.bytes);
        auto& held = slot->second;
        if (inserted) {
            held.order = m_held_order++;
            auto release_at = m_options.window.count() > 0
                                  ? copy.claim.event_time + m_options.window
                                  : Timestamp::max();
            m_release_queue.emplace(std::make_pair(release_at, held.order),
                                    copy.outcome.fingerprint.bytes);
        }
        m_held_bytes += copy.bytes.size();
        held.copies.push_back(std::move(copy));
    }

    // Lets go of every held event whose window closed before `watermark`
    // (all of them at Timestamp::max()): its copies are claimed in order, so
    // the store keeps each as evidence, and the newest is the one emitted;
    // the others are its duplicates.
    void release_held(Timestamp watermark) {
        auto now = now_utc();
        auto closed = [&](Timestamp release_at) {
            return watermark == Timestamp::max() || release_at < watermark;
        };
        while (!m_release_queue.empty() && closed(m_release_queue.begin()->first.first)) {
            auto fingerprint = m_release_queue.begin()->second;
            m_release_queue.erase(m_release_queue.begin());
            auto held = std::move(m_held.at(fingerprint));
            m_held.erase(fingerprint);
            std::vector<store::FingerprintClaim> claims;
            for (auto& copy : held.copies) {
                copy.claim.source = copy.source;
                claims.push_back(copy.claim);
            }
            auto answers = claim(claims, now);
            // An earlier run may already have let this event through.
            bool seen_before = !answers.front().first;
            const auto& newest = held.copies.back();
            // seen_count under --keep last is one number per event: every
            // copy the store has seen of it once its window closed, this
            // run's and earlier runs'.
            std::uint64_t seen_total = held.copies.size();
            for (const auto& answer : answers)
                seen_total = std::max(seen_total, answer.seen_count);
            for (std::size_t i = 0; i < held.copies.size(); ++i) {
                auto& copy = held.copies[i];
                m_held_bytes -= copy.bytes.size();
                forget_row(copy);
                auto answer = answers[i];
                answer.seen_count = seen_total;
                if (i + 1 < held.copies.size() || seen_before) {
                    answer.first = false;
                    if (!seen_before) {
                        answer.first_source = newest.source;
                        answer.first_line = newest.claim.line;
                    }
                } else {
                    answer.first = true;
                }
                route(copy.outcome, copy.bytes, answer);
            }
        }
    }

    // A row saved at an earlier commit is deleted at the next; one held and
    // let go between two commits never reaches the store.
    void forget_row(const Copy& copy) {
        if (m_held_scope.empty()) return;
        if (m_unsaved_held.erase(copy.row_id) == 0) m_unsaved_releases.push_back(copy.row_id);
    }

    void save_held() {
        if (m_held_scope.empty()) return;
        store::ReorderChanges changes;
        for (auto& [id, row] : m_unsaved_held)
            changes.held.push_back(std::move(row));
        changes.released = std::move(m_unsaved_releases);
        m_store->save_reorder_changes(m_held_scope, changes);
        m_unsaved_held.clear();
        m_unsaved_releases.clear();
    }

    // Output first, then the store: a crash in between makes a rerun repeat
    // the last batch's records (at-least-once), never lose one; and while the
    // batch's transaction is open, other processes on the store wait. Files
    // idem owns are synced and their sizes committed with the claims, which
    // makes a rerun exact.
    void commit() {
        m_output->flush();
        if (m_dups) m_dups->flush();
        m_since_commit = 0;
        try {
            if (m_owns_output) {
                save_held();
                m_store->save_checkpoint(m_checkpoint_key, synced_progress());
            }
            m_store->commit();
            m_batch_firsts.clear();
        } catch (const StoreError& error) {
            if (m_store_lost) throw; // the store in this process does not fail
            lose_store(error);
        }
    }

    // The owned outputs on disk, and how far they go.
    store::Checkpoint synced_progress() {
        m_output->sync();
        if (m_dups) m_dups->sync();
        store::Checkpoint done;
        // Never behind the run this one resumes: its records are done.
        done.records_done = std::max(m_records, m_skip);
        done.file_bytes["output"] = m_output->size();
        if (m_dups) done.file_bytes["dups"] = m_dups->size();
        return done;
    }

    // The last batch. Its checkpoint is marked finished: a rerun over the
    // same input (this run killed before it could exit) leaves the outputs
    // as they are; a run over another input starts them anew.
    void finish() {
        m_output->flush();
        if (m_dups) m_dups->flush();
        try {
            if (m_owns_output) {
                store::save_finished(*m_store, m_checkpoint_key, synced_progress(),
                                     m_input_identity);
                m_store->clear_reorder_state(m_held_scope);
            }
            m_store->commit();
            m_batch_firsts.clear();
        } catch (const StoreError& error) {
            if (m_store_lost) throw;
            lose_store(error);
        }
        write_back();
        if (m_reject_sink) m_reject_sink->flush();
    }

    DedupResult summarize(std::chrono::steady_clock::time_point start) const {
        DedupResult result;
        result.duplicates = m_duplicates;
        auto& summary = result.summary;
        summary.command = "dedup";
        summary.counts = {{"in", m_records}};
        if (m_skip > 0) summary.counts.emplace_back("resumed", std::min(m_skip, m_records));
        summary.counts.emplace_back("unique", m_unique);
        summary.counts.emplace_back("duplicates", m_duplicates);
        if (m_options.missing == MissingKey::pass)
            summary.counts.emplace_back("unkeyed", m_unkeyed);
        summary.counts.emplace_back("rejected", m_rejects->count());
        summary.counts.emplace_back("out", m_output->records_written());
        if (m_dups) summary.counts.emplace_back("dups_file", m_dups->records_written());
        if (m_options.on_store_error != StoreFailure::fail)
            summary.counts.emplace_back(
                m_options.on_store_error == StoreFailure::local ? "degraded" : "unclaimed",
                m_unclaimed);
        summary.facts.emplace_back("store", m_store_name);
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const DedupRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<store::Store> m_store;
    std::string m_store_name;
    std::unique_ptr<io::Sink> m_reject_sink;
    std::unique_ptr<io::Sink> m_owned_output;
    io::Sink* m_output = nullptr;
    std::unique_ptr<io::Sink> m_dups;
    bool m_owns_output = false;
    std::string m_checkpoint_key;
    std::optional<std::uint64_t> m_input_identity; // with -o: what this run reads
    std::uint64_t m_skip = 0;
    std::optional<record::RejectRouter> m_rejects;
    std::optional<record::InputStream> m_input;
    record::PositionTracker m_positions;
    std::string m_member;
    std::vector<store::FingerprintClaim> m_block_claims;
    std::uint64_t m_records = 0, m_unique = 0, m_duplicates = 0, m_unkeyed = 0, m_unclaimed = 0;
    bool m_store_lost = false; // the run goes on with a store in this process
    std::vector<store::FingerprintClaim> m_batch_firsts; // first copies not yet committed
    std::vector<store::FingerprintClaim> m_local_firsts; // local: to write back
    std::uint64_t m_first_seen_earlier = 0;  // repeats whose first copy an earlier run read
    std::vector<std::string> m_sources_read; // the inputs this run has read, in order
    std::uint64_t m_since_commit = 0;
    // --keep last
    std::unordered_map<store::FingerprintBytes, HeldCopies, store::FingerprintBytesHash> m_held;
    std::map<std::pair<Timestamp, std::uint64_t>, store::FingerprintBytes> m_release_queue;
    std::uint64_t m_held_order = 0;
    std::uint64_t m_held_bytes = 0;
    Timestamp m_watermark = Timestamp::min();
    // --keep last with -o: the held rows' scope in the store (empty without
    // -o), and what changed since the last commit.
    std::string m_held_scope;
    std::map<std::uint64_t, store::HeldRecordRow> m_unsaved_held;
    std::vector<std::uint64_t> m_unsaved_releases;
    std::uint64_t m_next_row_id = 0;
};

} // namespace

DedupResult run_dedup(const DedupRunOptions& options, io::Sink& standard_output,
                      io::Diagnostics& diagnostics) {
    return DedupRun(options, standard_output, diagnostics).run();
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
