// idem dedup over a stream of records (docs/dedup.md).

#include "idem/dedup/run.hpp"

#include "idem/dedup/detail/judge.hpp"
#include "idem/dedup/detail/key_counts.hpp"

#include "idem/record/annotate.hpp"
#include "idem/run/record_run.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/held_copies.hpp"
#include "idem/store/owned_outputs.hpp"
#include "idem/store/store.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"

#include <cstring>
#include <fmt/format.h>
#include <map>
#include <stdexcept>
#include <unordered_map>

namespace idem::dedup {

namespace {

using detail::BlockOutcome;
using detail::Outcome;
using detail::WorkerState;

// Whether a record was judged by the shared store or, after it failed
// (--on-store-error pass|local), only within this process.
enum class Judged { by_store, in_process };

// `"dedup":{...}` for the _idem annotation.
void append_annotation(std::string& out, const Outcome& outcome,
                       const store::FingerprintResult* claim, KeyPrinting print_key,
                       Judged judged = Judged::by_store) {
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
    if (print_key == KeyPrinting::on && !outcome.encoded_key.empty()) {
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

// One record on its way to the store, kept whole while --keep last holds it.
struct Copy {
    std::string bytes;
    Outcome outcome;
    store::FingerprintClaim claim; // its source view points into `source`
    std::string source;
    std::uint64_t row_id = 0; // with -o, its row among the held copies in the store
};

// With -o, each held copy is also a row in the store, committed with the
// checkpoint: a resumed run holds again exactly what the killed one held,
// so -o stays exact.
store::HeldCopyRow row_of(const Copy& copy) {
    store::HeldCopyRow row;
    row.id = copy.row_id;
    row.fingerprint = copy.outcome.fingerprint.bytes;
    row.source = copy.source;
    row.line = copy.claim.line;
    row.event_time = copy.claim.event_time;
    row.bytes = copy.bytes;
    return row;
}

// --keep last: every copy of a fingerprint, until its window closes (or the
// input ends), when the newest is the one emitted.
struct HeldCopies {
    std::vector<Copy> copies;
    std::uint64_t order = 0;
};

// The run frame's setup: the input, the reject file, the workers, and
// whether a signal may stop it.
run::RecordRunSetup frame_setup(const DedupRunOptions& options, io::Sink* rejects) {
    run::RecordRunSetup setup{options.input, rejects, options.strictness, options.threads};
    setup.interrupt = options.interrupt;
    return setup;
}

// The ordered stage of a dedup run: everything with side effects happens
// here, on the calling thread, in input order. One class past ~400 lines,
// on purpose: a batch's claims, the copies --keep last holds, the output
// and a store that fails mid-run (--on-store-error) all act on the same
// batch, and its commit must see them together. What each is lives apart:
// the worker (judge.cpp), the claims (store/), the outputs
// (store/owned_outputs.hpp).
class DedupRun {
public:
    DedupRun(const DedupRunOptions& options, io::Sink& standard_output,
             io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_store(open_store()),
          m_outputs(m_store->checkpoints(),
                    {"dedup", options.scope, options.input.paths, options.lock_timeout, true,
                     options.resume_to_stdout},
                    options.output_path, standard_output, diagnostics),
          m_output(&m_outputs.output()), m_dups(m_outputs.add("dups", options.dups_path)),
          m_counts_file(m_outputs.add("counts", options.counts_path)),
          m_run(frame_setup(options, m_outputs.add("reject", options.reject_path)), diagnostics) {
        m_run.resume_after(m_outputs.resume_point());
        if (m_outputs.owned() && keeps_last()) {
            m_held_name = m_outputs.checkpoint_name();
            if (m_outputs.resumed()) restore_held();
        }
    }

    DedupResult run() {
        auto start = std::chrono::steady_clock::now();
        auto& census = m_run.census();
        for (const auto& path : m_options.key.key_paths)
            census.expect_path("--key", path);
        for (const auto& path : m_options.key.ignore_paths)
            census.expect_path("--ignore", path, record::PathCensus::Scope::event);
        if (m_options.time_field) census.expect_path("--time-field", *m_options.time_field);
        auto states = m_run.states([&] { return std::make_unique<WorkerState>(m_options.key); });
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockOutcome& result) {
            judge_block(block, state, m_options, result);
        };
        steps.prepare = [&](const run::InputBlock& block, BlockOutcome& result) {
            claim_block(block, result);
        };
        auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t) {
            count_key(outcome, record);
            route_record(outcome, record);
        };
        // A resumed run's counts hold the records the run before it did.
        if (m_counts_file && !m_outputs.repeats_finished())
            steps.resumed = [&](const Outcome& outcome, const run::InputRecord& record) {
                count_key(outcome, record);
            };
        // The block's memory is reused next: records written from it in
        // place go out first.
        steps.release_block = [&] { m_output->release_in_place(); };
        steps.commit = [&] { commit(); };
        steps.commit_every = m_options.batch;
        // Live input gone quiet (tail -f): what was decided goes out now
        // instead of waiting for a full batch.
        steps.idle = [&] {
            if (m_run.records_since_commit() > 0) m_run.commit();
        };
        try {
            m_run.run(states, steps, route);
        } catch (const Interrupted& stop) {
            throw Interrupted(stop.signal(), stopped());
        }
        release_held(Timestamp::max());
        finish();
        note_earlier_runs();
        auto result = summarize(start);
        m_outputs.add_carried(result.summary.counts);
        census.report(m_diagnostics, result.summary);
        result.duplicates = result.summary.count("duplicates");
        return result;
    }

private:
    using Run = run::RecordRun<WorkerState, BlockOutcome>;

    // The shared store as --store, --lock-timeout and the fingerprints' cache
    // ask: for the run and for --on-store-error local's write-back alike.
    [[nodiscard]] store::StoreLocation shared_location() const {
        auto location = store::parse_store_uri(m_options.store_uri);
        location.lock_timeout = m_options.lock_timeout;
        location.cache_bytes = store::k_fingerprint_store_cache_bytes;
        return location;
    }

    std::unique_ptr<store::Store> open_store() {
        auto location = shared_location();
        m_store_name = location.describe();
        try {
            auto opened = store::open_store(location);
            m_store_lasts = location.kind != store::StoreKind::memory;
            return opened;
        } catch (const StoreError& error) {
            return store_in_process(error);
        }
    }

    // --on-store-error pass|local: the run goes on with a store in this
    // process, so repeats within it are still caught; what it judges is
    // counted apart (unclaimed, or degraded), and with local written back
    // to the shared store at the end. The batch claimed in the failed store
    // since its last commit is claimed again here: its records are out.
    void lose_store(const StoreError& error) {
        m_store = store_in_process(error);
        bool local = m_options.on_store_error == StoreFailure::local;
        if (!m_batch_firsts.empty()) {
            (void)m_store->fingerprints().claim_fingerprints(m_options.scope, m_batch_firsts,
                                                             now_utc());
            if (local)
                m_local_firsts.insert(m_local_firsts.end(), m_batch_firsts.begin(),
                                      m_batch_firsts.end());
            m_batch_firsts.clear();
        }
    }

    // The store a run goes on with once the shared one failed (or, unless
    // --on-store-error fail, never opened).
    std::unique_ptr<store::Store> store_in_process(const StoreError& error) {
        if (m_options.on_store_error == StoreFailure::fail) throw error;
        bool local = m_options.on_store_error == StoreFailure::local;
        m_diagnostics.warning(
            {},
            fmt::format("{}; judging within this process from here on ({}){}", error.what(),
                        local ? "--on-store-error local" : "--on-store-error pass",
                        local ? ": what it claims is written back when the store answers" : ""));
        m_store_lost = true;
        m_store_lasts = false;
        return store::open_store(store::parse_store_uri(":memory:"));
    }

    // --on-store-error local, at the end: the fingerprints judged in this
    // process go to the shared store, so later runs and other instances see
    // them. Those another instance claimed meanwhile are counted, not lost.
    void write_back() {
        if (m_options.on_store_error != StoreFailure::local || !m_store_lost) return;
        if (m_local_firsts.empty()) return;
        try {
            auto shared = store::open_store(shared_location());
            auto answers = shared->fingerprints().claim_fingerprints(m_options.scope,
                                                                     m_local_firsts, now_utc());
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

    // The copies the run this one resumes held at its last commit, in the
    // order it held them. Nothing is let go here: each of them had a window
    // still open at the watermark then, which no later record lowers.
    void restore_held() {
        WorkerState state(m_options.key);
        auto now = now_utc();
        for (auto& row : m_store->held_copies().load_held_copies(m_held_name)) {
            Copy copy;
            copy.bytes = std::move(row.bytes);
            copy.source = std::move(row.source);
            // Judged again for what the row does not keep (annotations, the
            // printed key); the fingerprint and time are the ones first found.
            copy.outcome = detail::judge_record(copy.bytes, state, m_options);
            copy.outcome.fingerprint.bytes = row.fingerprint;
            copy.outcome.event_time = row.event_time;
            copy.claim = claim_for(copy.outcome, copy.source, row.line, now);
            copy.row_id = row.id;
            m_next_row_id = std::max(m_next_row_id, row.id + 1);
            keep(std::move(copy));
        }
    }

    // How far from its claim's event time a copy is still caught. With
    // --time-field the TTL runs on the events' clock, as the incident ran
    // (a retry 6 minutes after its claim passes a 5-minute key, however fast
    // the log is read again): a claim is then a window of the TTL, unless
    // --window (never longer: the CLI checks) is narrower. Without it, only
    // the store's wall-clock expiry (expires_at) ends a claim.
    [[nodiscard]] Duration claim_window() const {
        if (!m_options.time_field) return m_options.window;
        if (m_options.window.count() > 0) return std::min(m_options.window, m_options.ttl);
        return m_options.ttl;
    }

    store::FingerprintClaim claim_for(const Outcome& outcome, std::string_view source,
                                      std::uint64_t line, Timestamp now) const {
        store::FingerprintClaim claim;
        claim.fingerprint = outcome.fingerprint.bytes;
        claim.event_time = outcome.event_time.value_or(now);
        claim.window = claim_window();
        claim.expires_at = now + m_options.ttl;
        claim.source = source;
        claim.line = line;
        return claim;
    }

    store::FingerprintClaim claim_for(const Outcome& outcome, const run::InputRecord& record,
                                      Timestamp now) const {
        return claim_for(outcome, *record.source, record.line, now);
    }

    std::vector<store::FingerprintResult> claim(const std::vector<store::FingerprintClaim>& claims,
                                                Timestamp now) {
        std::vector<store::FingerprintResult> answers;
        try {
            answers = m_store->fingerprints().claim_fingerprints(m_options.scope, claims, now);
        } catch (const StoreError& error) {
            lose_store(error);
            answers = m_store->fingerprints().claim_fingerprints(m_options.scope, claims, now);
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

    // Claims for the whole block in one call: one round trip to Redis, one
    // pass over the SQLite log's index. Answered in route_record().
    void claim_block(const run::InputBlock& block, BlockOutcome& result) {
        if (m_run.records() == 0) expect_records(block, result);
        m_block_now = now_utc();
        auto& claims = m_block_claims; // kept for its capacity
        claims.clear();
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            auto& outcome = result.outcomes[i];
            if (outcome.kind != Outcome::Kind::keyed || m_run.done_before(i) || keeps_last())
                continue;
            outcome.claim = static_cast<std::uint32_t>(claims.size());
            claims.push_back(claim_for(outcome, m_run.locate(block, outcome.line), m_block_now));
        }
        m_block_answers = claim(claims, m_block_now);
    }

    // --counts: every keyed record, whatever the store answers for it.
    void count_key(const Outcome& outcome, const run::InputRecord& record) {
        if (!m_counts_file || outcome.kind != Outcome::Kind::keyed) return;
        m_key_counts.add(outcome.fingerprint, outcome.encoded_key, *record.source, record.line,
                         outcome.event_time);
    }

    void route_record(const Outcome& outcome, run::InputRecord& record) {
        if (!set_aside(outcome, record)) return;
        if (keeps_last()) {
            hold(outcome, record, m_block_now);
            return;
        }
        if (outcome.claim == Outcome::k_unclaimed)
            throw std::logic_error("dedup: a keyed record reached routing without a claim");
        const auto& answer = m_block_answers.at(outcome.claim);
        if (!answer.first) note_first_copy(answer, record);
        route(outcome, record.bytes, answer,
              outcome.line.newline_follows ? InPlace::yes : InPlace::no);
    }

    // From the first block's records per byte and the input's size: the
    // store's table is then sized once (the table caps what it reserves).
    void expect_records(const run::InputBlock& block, const BlockOutcome& first) {
        auto expected = m_run.expected_records(block, first.outcomes.size());
        if (m_store && expected)
            m_store->fingerprints().expect_fingerprints(m_options.scope, *expected);
    }

    // A repeat whose first copy this run never read (another input, or this
    // record itself at the same line) was first seen by an earlier run.
    void note_first_copy(const store::FingerprintResult& answer, const run::InputRecord& record) {
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
            {}, fmt::format("{} record{} first seen by an earlier run in {} (scope {}) and "
                            "{} as {} now; --store :memory: for a fresh run",
                            m_first_seen_earlier, m_first_seen_earlier == 1 ? " was" : "s were",
                            m_store_name, quote(m_options.scope),
                            m_first_seen_earlier == 1 ? "counts" : "count",
                            m_first_seen_earlier == 1 ? "a duplicate" : "duplicates"));
    }

    // Rejects and unkeyed records; true when the record goes on to the store.
    bool set_aside(const Outcome& outcome, run::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long:
        case Outcome::Kind::failed_to_parse: // the run frame set these aside
        case Outcome::Kind::outside_range:   // ... and counted these
            return false;
        case Outcome::Kind::bad_time:
            m_run.rejects().reject(record, outcome.column, outcome.message);
            return false;
        case Outcome::Kind::missing_key:
            if (m_options.missing == MissingKey::reject) {
                m_run.rejects().reject(record, 0,
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
        if (duplicate && m_options.action == DuplicateAction::drop) target = m_dups;
        if (target == nullptr) return;
        if (!annotate && target == m_output) {
            if (in_place == InPlace::yes)
                target->write_record_in_place({bytes.data(), bytes.size() + 1});
            else
                target->write_record(bytes);
            return;
        }
        m_member.clear();
        append_annotation(m_member, outcome, &answer, m_options.print_key,
                          m_store_lost ? Judged::in_process : Judged::by_store);
        record::write_annotated(*target, bytes, outcome.has_annotations, m_member);
    }

    [[nodiscard]] bool keeps_last() const { return m_options.keep == KeepCopy::last; }

    void hold(const Outcome& outcome, const run::InputRecord& record, Timestamp now) {
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
        if (!m_held_name.empty()) {
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
        if (m_held_name.empty()) return;
        if (m_unsaved_held.erase(copy.row_id) == 0) m_unsaved_releases.push_back(copy.row_id);
    }

    void save_held() {
        if (m_held_name.empty()) return;
        store::HeldCopyChanges changes;
        for (auto& [id, row] : m_unsaved_held)
            changes.held.push_back(std::move(row));
        changes.released = std::move(m_unsaved_releases);
        m_store->held_copies().save_held_copies(m_held_name, changes);
        m_unsaved_held.clear();
        m_unsaved_releases.clear();
    }

    // Output first, then the store: a crash in between makes a rerun repeat
    // the last batch's records (at-least-once), never lose one; and while the
    // batch's transaction is open, other processes on the store wait. Files
    // idem owns are synced and their sizes committed with the claims, which
    // makes a rerun exact.
    void commit() {
        try {
            m_outputs.commit(m_store.get(), m_run.records_done(), carried_counts(),
                             [&] { save_held(); });
            m_batch_firsts.clear();
        } catch (const StoreError& error) {
            if (m_store_lost) throw; // the store in this process does not fail
            lose_store(error);
        }
    }

    // A signal stopped the run after a block: what was routed is committed
    // (and held copies saved) as at any commit, noted for a rerun to
    // standard output, and said (docs/dedup.md, "Interrupted").
    std::string stopped() {
        commit();
        m_run.flush_rejects();
        m_outputs.interrupted(m_store_lasts ? m_store.get() : nullptr, m_run.records_done(),
                              carried_counts());
        auto done = m_run.records_done();
        std::string what = fmt::format(
            "interrupted after {} record{}: their verdicts are committed to {} (scope {})", done,
            done == 1 ? "" : "s", m_store_name, quote(m_options.scope));
        if (m_outputs.owned())
            return what + fmt::format(", and {} holds their output: run the same command again "
                                      "to resume it byte for byte",
                                      quote(m_options.output_path));
        if (m_outputs.noted_interruption())
            return what + ", and their output went to standard output: to go on after them, run "
                          "the same command again with --resume-to-stdout and append (>>) to "
                          "that output; -o FILE resumes by itself";
        return what + "; this store does not outlive the run (or the input is not files), so a "
                      "rerun starts from scratch";
    }

    // The last batch. Its checkpoint is marked finished: a rerun over the
    // same input (this run killed before it could exit) leaves the outputs
    // as they are; a run over another input starts them anew.
    void finish() {
        if (m_counts_file && !m_outputs.repeats_finished())
            m_key_counts.write(*m_counts_file, m_options.key.key_paths.size());
        try {
            m_outputs.commit_finished(m_store.get(), m_run.records_done(), carried_counts(), [&] {
                if (!m_held_name.empty()) m_store->held_copies().clear_held_copies(m_held_name);
            });
            m_batch_firsts.clear();
        } catch (const StoreError& error) {
            if (m_store_lost) throw;
            lose_store(error);
        }
        write_back();
        m_run.flush_rejects();
    }

    // What this run counted that a run resuming it carries on from.
    store::RunCounts carried_counts() const {
        return store::only_named(summarize({}).summary.counts,
                                 {"unique", "duplicates", "unkeyed", "rejected", "outside_range",
                                  "out", "dups_file", "degraded", "unclaimed"});
    }

    // This run's own counts (add_carried() makes them the whole input's).
    DedupResult summarize(std::chrono::steady_clock::time_point start) const {
        DedupResult result;
        result.duplicates = m_duplicates;
        auto& summary = result.summary;
        summary.command = "dedup";
        summary.counts = {{"in", m_run.records()}};
        if (m_run.resume_point() > 0) summary.counts.emplace_back("resumed", m_run.skipped());
        summary.counts.emplace_back("unique", m_unique);
        summary.counts.emplace_back("duplicates", m_duplicates);
        if (m_options.missing == MissingKey::pass)
            summary.counts.emplace_back("unkeyed", m_unkeyed);
        summary.counts.emplace_back("rejected", m_run.rejects().count());
        m_run.add_window_count(summary.counts);
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
    std::string m_store_name;
    bool m_store_lost = false;  // the run goes on with a store in this process
    bool m_store_lasts = false; // a file or a server: it outlives the run
    std::unique_ptr<store::Store> m_store;
    store::OwnedOutputs m_outputs;
    io::Sink* m_output;
    io::Sink* m_dups;
    io::Sink* m_counts_file;
    detail::KeyCounts m_key_counts;
    Run m_run;
    std::string m_member;
    std::vector<store::FingerprintClaim> m_block_claims;
    std::vector<store::FingerprintResult> m_block_answers; // for m_block_claims, by Outcome::claim
    Timestamp m_block_now;
    std::uint64_t m_unique = 0, m_duplicates = 0, m_unkeyed = 0, m_unclaimed = 0;
    std::vector<store::FingerprintClaim> m_batch_firsts; // first copies not yet committed
    std::vector<store::FingerprintClaim> m_local_firsts; // local: to write back
    std::uint64_t m_first_seen_earlier = 0;  // repeats whose first copy an earlier run read
    std::vector<std::string> m_sources_read; // the inputs this run has read, in order
    // --keep last
    std::unordered_map<store::FingerprintBytes, HeldCopies, store::FingerprintBytesHash> m_held;
    std::map<std::pair<Timestamp, std::uint64_t>, store::FingerprintBytes> m_release_queue;
    std::uint64_t m_held_order = 0;
    std::uint64_t m_held_bytes = 0;
    Timestamp m_watermark = Timestamp::min();
    // --keep last with -o: the name the held copies are kept under in the
    // store (empty without -o), and what changed since the last commit.
    std::string m_held_name;
    std::map<std::uint64_t, store::HeldCopyRow> m_unsaved_held;
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
