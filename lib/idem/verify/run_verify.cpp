// idem verify over a stream of records (docs/verify.md).

#include "idem/verify/run.hpp"

#include "idem/verify/explain.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/record_run.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/verifier.hpp"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <map>
#include <thread>

namespace idem::verify {

void append_verdict(std::string& out, const Verdict& verdict) {
    out += "\"verify\":{\"valid\":";
    out += verdict.valid ? "true" : "false";
    out += ",\"scheme\":";
    record::append_json_string(out, verdict_scheme_name(verdict));
    if (!verdict.key_label.empty()) {
        out += ",\"key\":";
        record::append_json_string(out, verdict.key_label);
    }
    out += ",\"reason\":";
    record::append_json_string(out, verdict.reason);
    out += '}';
}

namespace {

// How long the store keeps a nonce, by the wall clock: the window after
// the latest of the delivery's times (event times decide verdicts; this
// only lets the store forget).
Timestamp nonce_keep_until(const Verdict& verdict, Timestamp received_at, Duration window) {
    auto latest = std::max({verdict.signed_at.value_or(received_at), received_at, now_utc()});
    return latest + window;
}

// The store verify keeps nonces and verdicts in, and what happens when it
// fails: fail (the error ends the run) or local (--on-store-error local:
// judged in the process from there on, marked, and written back to the
// store at the end if it answers).
class VerifyStore {
public:
    VerifyStore(const VerifyRunOptions& options, io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics) {
        try {
            m_store = store::open_store(store::parse_store_uri(options.store_uri));
        } catch (const StoreError& error) {
            lose(error);
        }
    }

    // A block's claims in one call: one round trip to a shared store.
    std::vector<store::NonceClaim> claim_nonces(std::span<const store::NonceRequest> requests) {
        std::vector<store::NonceClaim> claims;
        guarded([&] { claims = m_store->nonces().claim_nonces(requests); });
        if (m_lost)
            for (const auto& request : requests)
                m_unwritten_nonces.push_back(
                    {std::string(request.scope), std::string(request.nonce),
                     request.sighting.received_at, std::string(request.sighting.source),
                     request.sighting.line, request.window, request.keep_until});
        return claims;
    }

    void save_verdicts(const std::vector<store::VerdictRecord>& verdicts) {
        guarded([&] { m_store->verdicts().save_verdicts(store::k_verdict_scope, verdicts); });
        if (m_lost)
            m_unwritten_verdicts.insert(m_unwritten_verdicts.end(), verdicts.begin(),
                                        verdicts.end());
    }

    void commit() {
        guarded([&] { m_store->commit(); });
    }

    [[nodiscard]] bool lost() const { return m_lost; }

    // local: what was judged in the process goes to the store, if it
    // answers now; said either way.
    void write_back() {
        if (!m_lost || (m_unwritten_nonces.empty() && m_unwritten_verdicts.empty())) return;
        try {
            auto shared = store::open_store(store::parse_store_uri(m_options.store_uri));
            std::uint64_t seen_elsewhere = 0;
            for (const auto& nonce : m_unwritten_nonces)
                if (shared->nonces()
                        .claim_nonce(nonce.scope, nonce.nonce,
                                     {nonce.received_at, nonce.source, nonce.line}, nonce.window,
                                     nonce.keep_until)
                        .verdict == store::NonceVerdict::replay)
                    ++seen_elsewhere;
            if (!m_unwritten_verdicts.empty())
                shared->verdicts().save_verdicts(store::k_verdict_scope, m_unwritten_verdicts);
            shared->commit();
            m_diagnostics.warning(
                {},
                fmt::format(
                    "wrote {} nonce{} and {} verdict{} judged in this process back "
                    "to the store{}",
                    m_unwritten_nonces.size(), m_unwritten_nonces.size() == 1 ? "" : "s",
                    m_unwritten_verdicts.size(), m_unwritten_verdicts.size() == 1 ? "" : "s",
                    seen_elsewhere > 0 ? fmt::format(" ({} had been delivered to another instance "
                                                     "meanwhile: replays this run let through)",
                                                     seen_elsewhere)
                                       : std::string()));
        } catch (const StoreError& error) {
            m_diagnostics.warning({}, fmt::format("cannot write back to the store ({}): a later "
                                                  "run will not know the {} nonce{} judged here",
                                                  error.what(), m_unwritten_nonces.size(),
                                                  m_unwritten_nonces.size() == 1 ? "" : "s"));
        }
    }

private:
    struct UnwrittenNonce {
        std::string scope, nonce;
        Timestamp received_at;
        std::string source;
        std::uint64_t line = 0;
        Duration window;
        Timestamp keep_until;
    };

    // Runs `operation` on the store; when it fails under local, again on a
    // store in the process.
    template <typename Operation> void guarded(Operation operation) {
        try {
            operation();
        } catch (const StoreError& error) {
            if (m_lost) throw;
            lose(error);
            operation();
        }
    }

    void lose(const StoreError& error) {
        if (m_options.on_store_error != StoreFailure::local) throw error;
        m_lost = true;
        m_diagnostics.warning({},
                              fmt::format("{}; judging replays within this process from here "
                                          "on (--on-store-error local), written back at the end",
                                          error.what()));
        m_store = store::open_store(store::parse_store_uri(":memory:"));
    }

    const VerifyRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<store::Store> m_store;
    bool m_lost = false;
    std::vector<UnwrittenNonce> m_unwritten_nonces;
    std::vector<store::VerdictRecord> m_unwritten_verdicts;
};

} // namespace

namespace {

// What a worker found for one line; the ordered stage acts on it.
struct Outcome {
    enum class Kind { too_long, failed_to_parse, judged };
    io::BlockLine line;
    Kind kind = Kind::judged;
    std::uint64_t column = 0;
    std::string message;
    Verdict verdict;
    bool has_annotations = false;
    Timestamp now;
    std::optional<Diagnosis> diagnosis; // --explain, for an invalid verdict
    // --nonce: this record's place in its block's claims (VerifyRun::claim_block).
    static constexpr std::uint32_t k_unclaimed = UINT32_MAX;
    std::uint32_t nonce_claim = k_unclaimed;
};

using BlockOutcome = run::BlockOutcomes<Outcome>;

// One per worker thread: parsers and prepared keys are not shared.
struct WorkerState {
    record::RecordParser parser;
    Verifier verifier;
    std::optional<Explainer> explainer;
    explicit WorkerState(const VerifyRunOptions& options) : verifier(options.config) {
        if (options.explain) explainer.emplace(options.config, options.explain_budget);
    }
};

void judge_block(const run::InputBlock& block, WorkerState& state, const VerifyRunOptions& options,
                 Timestamp clock_now, BlockOutcome& result) {
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& outcome = result.outcomes.emplace_back();
        outcome.line = *line;
        if (line->bytes.size() > options.input.max_record_bytes) {
            outcome.kind = Outcome::Kind::too_long;
            continue;
        }
        if (auto failure = state.parser.parse(line->bytes)) {
            outcome.kind = Outcome::Kind::failed_to_parse;
            outcome.column = failure->column;
            outcome.message = std::move(failure->message);
            continue;
        }
        outcome.has_annotations = state.parser.has_annotations();
        if (state.parser.shape() != record::RecordShape::envelope) {
            outcome.verdict.scheme = options.config.scheme;
            outcome.verdict.reason =
                "not an envelope: a plain event carries no signature headers to check";
            continue;
        }
        const auto& envelope = state.parser.envelope();
        // A delivery is judged at its event time (received_at), unless
        // --now says when; one with none is judged now.
        outcome.now = options.now.value_or(clock_now);
        if (!options.now)
            if (auto received = record::event_time(state.parser, nullptr).time)
                outcome.now = *received;
        outcome.verdict = state.verifier.verify(envelope, outcome.now);
        // Only invalid deliveries cost anything more.
        if (!outcome.verdict.valid && state.explainer)
            outcome.diagnosis = state.explainer->explain(envelope, outcome.now, outcome.verdict);
    }
    result.lines = cursor.lines_seen();
}

} // namespace

namespace {

// One verify run: the frame reads and the workers judge; here, on the
// ordered stage, replays are judged against the nonce store, verdicts kept
// and each record written where its verdict sends it.
class VerifyRun {
public:
    VerifyRun(const VerifyRunOptions& options, io::Sink& output, io::Diagnostics& diagnostics)
        : m_options(options), m_output(output),
          m_reject_sink(io::Sink::create_file_if_named(options.reject_path)),
          m_run({options.input, m_reject_sink.get(), options.strictness, options.threads},
                diagnostics) {
        if (options.invalid_routing == InvalidRouting::divert && !options.invalid_path.empty())
            m_invalid_sink = io::Sink::create_file(options.invalid_path);
        if (options.nonce == NonceCheck::on || options.keep_verdicts)
            m_store.emplace(options, diagnostics);
    }

    RunResult run() {
        auto start = std::chrono::steady_clock::now();
        auto clock_now = now_utc();
        auto states = m_run.states([&] { return std::make_unique<WorkerState>(m_options); });
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockOutcome& result) {
            judge_block(block, state, m_options, clock_now, result);
        };
        if (m_options.nonce == NonceCheck::on)
            steps.prepare = [&](const run::InputBlock& block, BlockOutcome& result) {
                claim_block(block, result);
            };
        auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t) {
            route_record(outcome, record);
        };
        try {
            m_run.run(states, steps, route);
        } catch (const InputError&) {
            m_output.flush();
            throw;
        }
        finish();
        return summarize(start);
    }

private:
    using Run = run::RecordRun<WorkerState, BlockOutcome>;
    // --keep-verdicts: saved a batch at a time, committed with the nonces.
    static constexpr std::size_t k_verdicts_per_save = 4096;

    // The ordered stage: nonces, kept verdicts and output, in input order.
    void route_record(Outcome& outcome, const run::InputRecord& record) {
        auto& verdict = outcome.verdict;
        if (verdict.valid && m_options.nonce == NonceCheck::on) check_replay(outcome, record);
        if (m_options.keep_verdicts) keep_verdict(outcome, record);
        m_member.clear();
        append_verdict(m_member, verdict);
        if (outcome.diagnosis && !verdict.valid) {
            const auto& diagnosis = *outcome.diagnosis;
            m_member.pop_back(); // inside "verify"
            append_diagnosis(m_member, diagnosis);
            m_member += '}';
            ++m_diagnoses[diagnosis.kind];
            (diagnosis.proven                  ? m_explained
             : diagnosis.kind == "unexplained" ? m_unexplained
                                               : m_suspected)++;
        }
        write(outcome, record);
    }

    // Every valid delivery's message id in the block, claimed in one call
    // before the block is routed, in input order.
    void claim_block(const run::InputBlock& block, BlockOutcome& result) {
        m_block_requests.clear();
        for (std::size_t i = 0; i < result.outcomes.size(); ++i) {
            auto& outcome = result.outcomes[i];
            const auto& verdict = outcome.verdict;
            if (outcome.kind != Outcome::Kind::judged || !verdict.valid || m_run.done_before(i))
                continue;
            auto record = m_run.locate(block, outcome.line);
            outcome.nonce_claim = static_cast<std::uint32_t>(m_block_requests.size());
            m_block_requests.push_back(
                {verdict_scheme_name(verdict),
                 verdict.nonce,
                 {outcome.now, *record.source, record.line},
                 m_options.nonce_window,
                 nonce_keep_until(verdict, outcome.now, m_options.nonce_window),
                 verdict.message_id});
        }
        m_block_claims = m_store->claim_nonces(m_block_requests);
    }

    // A valid delivery whose message id the store has seen is a replay.
    void check_replay(Outcome& outcome, const run::InputRecord&) {
        auto& verdict = outcome.verdict;
        if (outcome.nonce_claim == Outcome::k_unclaimed)
            throw std::logic_error("verify: a valid delivery reached routing without a claim");
        const auto& claim = m_block_claims.at(outcome.nonce_claim);
        if (claim.verdict == store::NonceVerdict::replay) {
            verdict.valid = false;
            ++m_replayed;
            verdict.reason = fmt::format(
                "replayed: this message was already delivered{}",
                claim.first_seen ? " at " + format_rfc3339(*claim.first_seen) : std::string());
        } else if (claim.verdict == store::NonceVerdict::same_record) {
            ++m_already_verified;
            verdict.reason += " (already verified in an earlier run)";
        }
        if (m_store->lost()) {
            ++m_judged_in_process;
            verdict.reason += " (replays judged within this run only: the store failed)";
        }
    }

    void keep_verdict(const Outcome& outcome, const run::InputRecord& record) {
        const auto& verdict = outcome.verdict;
        auto& kept = m_kept_verdicts.emplace_back();
        kept.source = *record.source;
        kept.line = record.line;
        kept.valid = verdict.valid;
        kept.scheme = verdict_scheme_name(verdict);
        kept.message_id = verdict.message_id;
        kept.reason = verdict.reason;
        kept.checked_at = outcome.now;
        if (m_kept_verdicts.size() >= k_verdicts_per_save) save_kept();
    }

    void save_kept() {
        if (m_kept_verdicts.empty()) return;
        m_store->save_verdicts(m_kept_verdicts);
        m_kept_verdicts.clear();
    }

    // Valid to the output; invalid to it too (--invalid keep), to --invalid
    // FILE, or dropped.
    void write(const Outcome& outcome, const run::InputRecord& record) {
        if (outcome.verdict.valid) {
            ++m_valid;
            record::write_annotated(m_output, record.bytes, outcome.has_annotations, m_member);
            return;
        }
        ++m_invalid;
        if (m_options.invalid_routing == InvalidRouting::keep_in_output)
            record::write_annotated(m_output, record.bytes, outcome.has_annotations, m_member);
        else if (m_invalid_sink)
            record::write_annotated(*m_invalid_sink, record.bytes, outcome.has_annotations,
                                    m_member);
        else
            ++m_dropped;
    }

    // Output first, then the nonces: a crash in between repeats a verdict on
    // rerun rather than losing a record.
    void finish() {
        m_output.flush();
        if (m_invalid_sink) m_invalid_sink->flush();
        m_run.flush_rejects();
        if (m_store) {
            save_kept();
            m_store->commit();
            m_store->write_back();
        }
    }

    RunResult summarize(std::chrono::steady_clock::time_point start) {
        RunResult result;
        result.findings = m_invalid;
        auto& summary = result.summary;
        summary.command = "verify";
        summary.counts = {{"in", m_run.records()}, {"valid", m_valid}, {"invalid", m_invalid}};
        if (m_options.nonce == NonceCheck::on) {
            summary.counts.emplace_back("replayed", m_replayed);
            if (m_already_verified > 0)
                summary.counts.emplace_back("already_verified", m_already_verified);
            if (m_judged_in_process > 0)
                summary.counts.emplace_back("degraded", m_judged_in_process);
        }
        summary.counts.emplace_back("rejected", m_run.rejects().count());
        if (m_options.explain) {
            // Proven: a changed copy verified. Suspected: read off the
            // delivery (truncated, decompressed). Unexplained: treat as forged.
            summary.counts.emplace_back("explained", m_explained);
            summary.counts.emplace_back("suspected", m_suspected);
            summary.counts.emplace_back("unexplained", m_unexplained);
            summary.parts_name = "cause";
            for (const auto& [kind, count] : m_diagnoses)
                summary.parts.push_back({kind, {{"deliveries", count}}, {}});
        }
        summary.counts.emplace_back("out", m_output.records_written());
        if (m_invalid_sink)
            summary.counts.emplace_back("invalid_file", m_invalid_sink->records_written());
        if (m_options.invalid_routing == InvalidRouting::divert && !m_invalid_sink)
            summary.counts.emplace_back("dropped", m_dropped);
        const auto& config = m_options.config;
        summary.facts.emplace_back("scheme", config.scheme == Scheme::provider
                                                 ? config.providers.at(config.provider).name
                                                 : std::string(scheme_name(config.scheme)));
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const VerifyRunOptions& m_options;
    io::Sink& m_output;
    std::unique_ptr<io::Sink> m_reject_sink; // outlives the frame, which writes it
    Run m_run;
    std::unique_ptr<io::Sink> m_invalid_sink;
    std::optional<VerifyStore> m_store; // --nonce, --keep-verdicts
    std::vector<store::VerdictRecord> m_kept_verdicts;
    // --nonce: the block being routed's claims, asked of the store at once.
    std::vector<store::NonceRequest> m_block_requests;
    std::vector<store::NonceClaim> m_block_claims;
    std::string m_member;                             // the record's "verify" annotation, reused
    std::map<std::string, std::uint64_t> m_diagnoses; // --explain: by kind
    std::uint64_t m_explained = 0, m_suspected = 0, m_unexplained = 0;
    std::uint64_t m_valid = 0, m_invalid = 0, m_dropped = 0, m_replayed = 0, m_already_verified = 0,
                  m_judged_in_process = 0;
};

} // namespace

RunResult run_verify(const VerifyRunOptions& options, io::Sink& output,
                     io::Diagnostics& diagnostics) {
    VerifyRun run(options, output, diagnostics);
    return run.run();
}

} // namespace idem::verify
