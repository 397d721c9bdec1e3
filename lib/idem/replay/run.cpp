// idem replay: read, select, claim, send, judge, record (docs/replay.md).

#include "idem/replay/run.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/envelope_writer.hpp"
#include "idem/record/parser.hpp"
#include "idem/replay/reader.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/owner.hpp"
#include "idem/util/text.hpp"
#include "idem/verify/signer.hpp"

#include <fmt/format.h>
#include <queue>
#include <random>
#include <thread>
#include <unordered_map>

namespace idem::replay {

namespace {

using Clock = std::chrono::steady_clock;

// How many records wait for a claim at once, and how long outcomes wait
// for their commit: small enough that a crash repeats little.
constexpr std::size_t k_claim_batch = 256;
constexpr auto k_commit_interval = std::chrono::milliseconds(200);
constexpr std::size_t k_commit_outcomes = 512;
constexpr std::size_t k_response_head_bytes = 256;

// How often a key another live run holds is asked about again: that run may
// finish it (then it is skipped) long before its lease ends, and several
// replays sharing a ledger then end together instead of a lease apart.
constexpr auto k_held_key_recheck = std::chrono::seconds(1);

struct Job {
    Candidate candidate;
    store::ReplayEntry entry;
    std::uint32_t attempts_this_run = 0;
    Clock::time_point due;
    Duration latency{0}; // of the last attempt
};

struct Counts {
    std::uint64_t completed = 0;
    std::uint64_t failed = 0;
    std::uint64_t skipped = 0;
    std::uint64_t attempts = 0;
    std::uint64_t retries = 0;
};

std::string default_scope(const std::string& to) {
    return "replay:" + to;
}

class Replayer {
public:
    Replayer(const ReplayOptions& options, io::Sink& output, io::Diagnostics& diagnostics)
        : m_options(options), m_output(output), m_diagnostics(diagnostics),
          m_reader(options, diagnostics),
          m_scope(options.scope.empty() ? default_scope(options.to) : options.scope),
          m_owner(new_owner_id()), m_budget(options.retry_budget),
          m_random(options.seed
                       ? options.seed
                       : static_cast<std::uint64_t>(Clock::now().time_since_epoch().count())) {
        if (options.resign) m_signer.emplace(*options.resign);
    }

    ReplayResult run();

private:
    void dry_run(const Candidate& candidate);
    void claim(std::vector<Candidate> candidates);
    void launch_ready();
    void send(std::uint64_t id, Clock::time_point now);
    void collect(Duration wait);
    void judge(std::uint64_t job_id, net::TransferResult result);
    void finish(Job& job, store::ReplayState state, const std::string& error);
    void skip(const Candidate& candidate, std::string reason);
    void commit_if_due(bool force);
    void persist(const std::vector<store::ReplayEntry>& attempts);
    void write_unrecorded_lines();
    void send_all();
    void drain_after_ledger_failure();
    void renew_leases_if_due();
    Clock::time_point due_time(const Candidate& candidate);

    const ReplayOptions& m_options;
    io::Sink& m_output;
    io::Diagnostics& m_diagnostics;
    CandidateReader m_reader;
    std::string m_scope;
    std::string m_owner;
    RetryBudget m_budget;
    std::mt19937_64 m_random;
    std::optional<verify::Signer> m_signer;
    std::unique_ptr<store::Store> m_store;
    std::optional<net::HttpClient> m_client;

    Counts m_counts;
    std::optional<Timestamp> m_first_time; // --timing original
    Clock::time_point m_start = Clock::now();
    std::vector<std::pair<Clock::time_point, Candidate>> m_held_elsewhere;
    std::unordered_map<std::uint64_t, Job> m_jobs;
    std::uint64_t m_next_job = 1;
    using Due = std::pair<Clock::time_point, std::uint64_t>;
    std::priority_queue<Due, std::vector<Due>, std::greater<>> m_ready;
    std::size_t m_in_flight = 0;
    Clock::time_point m_next_send = Clock::now();
    std::vector<store::ReplayEntry> m_unsaved;
    std::vector<std::string> m_unwritten; // outcome lines of m_unsaved, written once committed
    Clock::time_point m_last_commit = Clock::now();
    Clock::time_point m_last_renewal = Clock::now();
};

void Replayer::dry_run(const Candidate& candidate) {
    std::string line = "{\"key\":";
    record::append_json_string(line, candidate.key);
    line += ",\"outcome\":\"dry-run\",\"method\":";
    record::append_json_string(line, candidate.request.method);
    line += ",\"url\":";
    record::append_json_string(line, candidate.request.url);
    line += ",\"headers\":[";
    for (std::size_t i = 0; i < candidate.request.headers.size(); ++i) {
        const auto& [name, value] = candidate.request.headers[i];
        line += i ? ",[" : "[";
        record::append_json_string(line, name);
        line += ',';
        record::append_json_string(line, value);
        line += ']';
    }
    line += fmt::format("],\"body_bytes\":{},\"source\":", candidate.request.body.size());
    record::append_json_string(line, candidate.source);
    line += '}';
    m_output.write_record(line);
}

Clock::time_point Replayer::due_time(const Candidate& candidate) {
    if (m_options.timing != Timing::original || !candidate.time) return Clock::now();
    if (!m_first_time) m_first_time = candidate.time;
    auto offset = *candidate.time - *m_first_time;
    if (offset.count() < 0) offset = Duration(0); // out-of-order captures go at once
    return m_start +
           std::chrono::duration_cast<Clock::duration>(Duration(
               static_cast<Duration::rep>(static_cast<double>(offset.count()) / m_options.speed)));
}

void Replayer::claim(std::vector<Candidate> candidates) {
    if (candidates.empty()) return;
    std::vector<std::string> keys;
    keys.reserve(candidates.size());
    for (const auto& candidate : candidates)
        keys.push_back(candidate.key);
    auto now = now_utc();
    auto claims = m_store->replay_ledger().claim_replays(m_scope, keys, m_owner, now,
                                                         now + m_options.lease, m_options.rerun);
    // Durable before anything is sent: a crash from here on leaves these keys
    // in progress, and a rerun resends them with the same key.
    m_store->commit();
    for (std::size_t i = 0; i < candidates.size(); ++i) {
        auto& claim = claims[i];
        auto& candidate = candidates[i];
        if (claim.granted) {
            Job job;
            job.entry = claim.previous.value_or(store::ReplayEntry{});
            job.entry.key = candidate.key;
            job.entry.owner = m_owner;
            job.due = due_time(candidate);
            job.candidate = std::move(candidate);
            auto id = m_next_job++;
            m_ready.emplace(job.due, id);
            m_jobs.emplace(id, std::move(job));
            continue;
        }
        const auto& previous = *claim.previous;
        switch (previous.state) {
        case store::ReplayState::completed:
            skip(candidate, fmt::format("completed earlier (status {})", previous.status));
            break;
        case store::ReplayState::failed:
            skip(candidate,
                 fmt::format("failed for good earlier ({}); --retry-failed sends it again",
                             previous.error));
            break;
        case store::ReplayState::in_progress: {
            if (previous.owner == m_owner) {
                // The ledger, not a set in memory, knows this run's keys.
                skip(candidate, "same key as an earlier record in this run");
                break;
            }
            // Another run holds it: look again soon, and take it over once
            // its lease ends unless that run finished it.
            auto wait = std::min<Duration>(std::max(Duration(0), previous.lease_until - now) +
                                               std::chrono::milliseconds(50),
                                           k_held_key_recheck);
            m_held_elsewhere.emplace_back(Clock::now() +
                                              std::chrono::duration_cast<Clock::duration>(wait),
                                          std::move(candidate));
            break;
        }
        }
    }
}

void Replayer::launch_ready() {
    auto now = Clock::now();
    // Each launch commits its attempts first: launching as half the slots
    // free up, not one by one, keeps that to one commit per few requests.
    auto free_slots = m_options.concurrency - std::min(m_in_flight, m_options.concurrency);
    if (m_in_flight > 0 && free_slots < std::max<std::size_t>(1, m_options.concurrency / 2)) return;
    // Which jobs go now; their attempts reach the ledger before any request
    // leaves, so a kill mid-send still counts it (a key sent twice across a
    // kill shows 2).
    std::vector<std::uint64_t> launching;
    std::vector<store::ReplayEntry> attempts;
    auto next_send = m_next_send;
    while (m_in_flight + launching.size() < m_options.concurrency && !m_ready.empty() &&
           m_ready.top().first <= now) {
        if (m_options.rate_per_second > 0 && now < next_send) break;
        auto id = m_ready.top().second;
        m_ready.pop();
        auto& job = m_jobs.at(id);
        ++job.attempts_this_run;
        ++job.entry.attempts;
        ++m_counts.attempts;
        if (job.attempts_this_run == 1) m_budget.count_first_attempt();
        job.entry.state = store::ReplayState::in_progress;
        job.entry.owner = m_owner;
        job.entry.lease_until = now_utc() + m_options.lease;
        job.entry.updated_at = now_utc();
        attempts.push_back(job.entry);
        launching.push_back(id);
        if (m_options.rate_per_second > 0)
            next_send = std::max(next_send, now) +
                        std::chrono::duration_cast<Clock::duration>(
                            std::chrono::duration<double>(1.0 / m_options.rate_per_second));
    }
    if (launching.empty()) return;
    persist(attempts);
    for (auto id : launching)
        send(id, now);
}

void Replayer::send(std::uint64_t id, Clock::time_point now) {
    auto& job = m_jobs.at(id);
    auto request = job.candidate.request;
    {
        if (m_signer) {
            // Captured signatures expire: sign again, as of now.
            record::Envelope envelope;
            envelope.method = request.method;
            auto path_start = request.url.find('/', request.url.find("://") + 3);
            envelope.path = path_start == std::string::npos
                                ? std::string_view("/")
                                : std::string_view(request.url).substr(path_start);
            envelope.body = request.body;
            for (const auto& [name, value] : request.headers)
                envelope.headers.push_back({name, value});
            auto signature = m_signer->signature_headers(envelope, now_utc());
            std::erase_if(request.headers, [&](const auto& header) {
                return std::any_of(signature.begin(), signature.end(), [&](const auto& added) {
                    return iequals(added.first, header.first);
                });
            });
            for (auto& header : signature)
                request.headers.push_back(std::move(header));
        }
        m_client->start(id, std::move(request));
        ++m_in_flight;
        if (m_options.rate_per_second > 0)
            m_next_send = std::max(m_next_send, now) +
                          std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(1.0 / m_options.rate_per_second));
    }
}

void Replayer::skip(const Candidate& candidate, std::string reason) {
    ++m_counts.skipped;
    std::string line = "{\"key\":";
    record::append_json_string(line, candidate.key);
    line += ",\"outcome\":\"skipped\",\"reason\":";
    record::append_json_string(line, reason);
    line += ",\"source\":";
    record::append_json_string(line, candidate.source);
    line += '}';
    m_output.write_record(line);
}

void Replayer::finish(Job& job, store::ReplayState state, const std::string& error) {
    auto& entry = job.entry;
    entry.state = state;
    entry.error = error;
    entry.updated_at = now_utc();
    (state == store::ReplayState::completed ? m_counts.completed : m_counts.failed)++;
    std::string line = "{\"key\":";
    record::append_json_string(line, entry.key);
    line += fmt::format(",\"outcome\":\"{}\",\"attempts\":{},\"status\":{},\"latency_ms\":{:.3f}",
                        store::replay_state_name(state), job.attempts_this_run, entry.status,
                        static_cast<double>(job.latency.count()) / 1000.0);
    if (!error.empty()) {
        line += ",\"error\":";
        record::append_json_string(line, error);
    }
    if (state == store::ReplayState::failed && !entry.response_head.empty()) {
        line += ",\"response\":";
        record::append_json_string(line, entry.response_head);
    }
    line += ",\"source\":";
    record::append_json_string(line, job.candidate.source);
    line += '}';
    // The line waits for the ledger: stdout never says completed (or
    // failed) before the ledger holds it.
    m_unwritten.push_back(std::move(line));
    m_unsaved.push_back(entry);
}

void Replayer::judge(std::uint64_t job_id, net::TransferResult result) {
    auto found = m_jobs.find(job_id);
    auto& job = found->second;
    auto& entry = job.entry;
    entry.status = result.status;
    entry.latency_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(result.latency).count();
    job.latency = result.latency;
    if (result.transport == net::TransferResult::Transport::answered) {
        entry.response_digest = result.digest;
        entry.response_head = result.body.substr(0, k_response_head_bytes);
        if (!record::is_valid_utf8(entry.response_head)) entry.response_head = "(binary)";
    }
    AttemptResult attempt;
    attempt.transport = static_cast<AttemptResult::Transport>(result.transport);
    attempt.status = result.status;
    attempt.retry_after = result.retry_after;
    attempt.error = result.error;
    auto judgement = judge_attempt(attempt, m_options.rules, now_utc());
    if (judgement.verdict == Judgement::Verdict::completed) {
        entry.permanent = false;
        finish(job, store::ReplayState::completed, "");
    } else if (judgement.verdict == Judgement::Verdict::failed_for_good) {
        entry.permanent = true;
        finish(job, store::ReplayState::failed, judgement.error);
    } else if (job.attempts_this_run >= m_options.max_attempts) {
        entry.permanent = false; // a later run may try again
        finish(job, store::ReplayState::failed,
               fmt::format("{} after {} attempts (--max-attempts)", judgement.error,
                           job.attempts_this_run));
    } else if (!m_budget.try_spend()) {
        entry.permanent = false;
        if (m_budget.refused() == 1)
            m_diagnostics.warning(SourcePosition{job.candidate.source, 0, 0, 0},
                                  fmt::format("the retry budget ({:.0f}% of first attempts, plus "
                                              "{} retries any run may make) is spent after {} "
                                              "retries: failures are no longer retried in this run",
                                              m_options.retry_budget * 100, m_budget.floor(),
                                              m_budget.spent()));
        finish(job, store::ReplayState::failed,
               fmt::format("{} (retry budget spent)", judgement.error));
    } else {
        ++m_counts.retries;
        std::uniform_real_distribution<double> uniform(0.0, 1.0);
        auto delay = backoff_delay(m_options.backoff, job.attempts_this_run, uniform(m_random));
        if (judgement.wait_at_least) delay = std::max(delay, *judgement.wait_at_least);
        job.due = Clock::now() + std::chrono::duration_cast<Clock::duration>(delay);
        m_ready.emplace(job.due, job_id);
        return;
    }
    m_jobs.erase(found);
}

void Replayer::collect(Duration wait) {
    for (auto& [id, result] : m_client->poll(wait)) {
        --m_in_flight;
        judge(id, std::move(result));
    }
    m_diagnostics.progress(m_counts.completed + m_counts.failed + m_counts.skipped,
                           m_reader.bytes_read(), std::nullopt);
}

void Replayer::commit_if_due(bool force) {
    auto now = Clock::now();
    if (!force && m_unsaved.size() < k_commit_outcomes && now - m_last_commit < k_commit_interval)
        return;
    persist({});
    m_output.flush();
    m_last_commit = now;
}

// Saves the outcomes waiting (and `attempts`, entries about to be sent),
// commits, and only then writes the outcomes' lines. When the ledger cannot
// take them, the lines say so ("recorded":false) before the error ends the
// run: stdout is never ahead of the ledger.
void Replayer::persist(const std::vector<store::ReplayEntry>& attempts) {
    if (m_unsaved.empty() && attempts.empty()) return;
    try {
        if (!m_unsaved.empty()) m_store->replay_ledger().save_replay_entries(m_scope, m_unsaved);
        if (!attempts.empty()) m_store->replay_ledger().save_replay_entries(m_scope, attempts);
        m_store->commit();
    } catch (const StoreError&) {
        write_unrecorded_lines();
        throw;
    }
    m_unsaved.clear();
    for (const auto& line : m_unwritten)
        m_output.write_record(line);
    m_unwritten.clear();
}

// The outcomes judged but not yet in the ledger, when the ledger fails:
// their lines still reach stdout, so nothing sent goes unsaid, but as
// "outcome":"unrecorded" (what the target answered under "answered"): no
// line says completed or failed unless the ledger holds it, since a rerun
// sends an unrecorded key again.
void Replayer::write_unrecorded_lines() {
    constexpr std::string_view k_outcome = ",\"outcome\":\"";
    for (auto& line : m_unwritten) {
        // The first one is the field: a key is a JSON string, in which
        // this sequence cannot appear unescaped.
        auto at = line.find(k_outcome);
        if (at != std::string::npos) {
            auto value = at + k_outcome.size();
            auto end = line.find('"', value);
            auto answered = line.substr(value, end - value);
            line.replace(at, end + 1 - at,
                         fmt::format(",\"outcome\":\"unrecorded\",\"answered\":\"{}\"", answered));
        }
        line.insert(line.size() - 1, ",\"recorded\":false");
        m_output.write_record(line);
    }
    m_unwritten.clear();
    m_unsaved.clear();
    try {
        m_output.flush();
    } catch (const Error&) {
    }
}

void Replayer::renew_leases_if_due() {
    auto now = Clock::now();
    if (now - m_last_renewal < m_options.lease / 3 || m_jobs.empty()) return;
    std::vector<std::string> keys;
    keys.reserve(m_jobs.size());
    for (const auto& [id, job] : m_jobs)
        keys.push_back(job.entry.key);
    m_store->replay_ledger().renew_replay_leases(m_scope, keys, m_owner,
                                                 now_utc() + m_options.lease);
    m_store->commit();
    m_last_renewal = now;
}

void Replayer::send_all() {
    auto window = m_options.concurrency * 4 + k_claim_batch * 16;
    while (true) {
        // Ask again about keys another run held (k_held_key_recheck).
        std::vector<Candidate> batch;
        auto now = Clock::now();
        std::erase_if(m_held_elsewhere, [&](auto& held) {
            if (held.first > now || batch.size() >= k_claim_batch) return false;
            batch.push_back(std::move(held.second));
            return true;
        });
        // Keys parked for another run count against the window too, so
        // memory stays bounded while that run holds them. New keys are
        // claimed a full batch at a time (one round trip to a shared
        // ledger) unless the requests ready to go run short.
        auto occupied = m_jobs.size() + m_held_elsewhere.size();
        bool refill = occupied + k_claim_batch <= window || m_ready.size() < m_options.concurrency;
        while (refill && batch.size() < k_claim_batch && occupied + batch.size() < window) {
            auto candidate = m_reader.next();
            if (!candidate) break;
            batch.push_back(std::move(*candidate));
        }
        claim(std::move(batch));
        launch_ready();
        if (m_reader.done() && m_jobs.empty() && m_held_elsewhere.empty()) break;
        auto wait = Duration(std::chrono::milliseconds(50));
        if (m_in_flight == 0 && !m_ready.empty()) {
            // The next send: when its record is due, and the rate allows it.
            auto next = std::max(m_ready.top().first,
                                 m_options.rate_per_second > 0 ? m_next_send : Clock::time_point{});
            auto until_due = std::chrono::duration_cast<Duration>(next - Clock::now());
            wait = std::clamp(until_due, Duration(0), wait);
        }
        if (m_in_flight > 0)
            collect(wait);
        else if (wait.count() > 0)
            std::this_thread::sleep_for(wait);
        commit_if_due(false);
        renew_leases_if_due();
    }
    commit_if_due(true);
}

// The ledger failed mid-run: the requests already sent still get their
// answers and their lines ("recorded":false) before the error ends the run,
// so stdout accounts for every send. Bounded by the transfer timeouts.
void Replayer::drain_after_ledger_failure() {
    try {
        while (m_in_flight > 0)
            collect(Duration(std::chrono::milliseconds(100)));
    } catch (const Error&) {
    }
    write_unrecorded_lines();
}

ReplayResult Replayer::run() {
    auto started = Clock::now();
    if (m_options.dry_run) {
        while (auto candidate = m_reader.next())
            dry_run(*candidate);
    } else {
        auto location = store::parse_store_uri(m_options.store_uri);
        location.lock_timeout = m_options.lock_timeout;
        m_store = store::open_store(location);
        m_client.emplace(m_options.timeouts);
        try {
            send_all();
        } catch (const StoreError&) {
            drain_after_ledger_failure();
            throw;
        }
    }
    m_output.flush();

    ReplayResult result;
    result.failed = m_counts.failed;
    result.summary.command = "replay";
    const auto& read = m_reader.counts();
    result.summary.counts = {{"in", read.records},
                             {"selected", read.selected},
                             {"filtered_out", read.filtered_out},
                             {"rejected", m_reader.rejected()},
                             {"completed", m_counts.completed},
                             {"failed", m_counts.failed},
                             {"skipped", m_counts.skipped},
                             {"attempts", m_counts.attempts},
                             {"retries", m_counts.retries}};
    m_reader.census().report(m_diagnostics, result.summary);
    if (m_options.dry_run) result.summary.facts.emplace_back("mode", "dry run: nothing sent");
    result.summary.facts.emplace_back("to", m_options.to);
    if (m_store) result.summary.facts.emplace_back("ledger", m_store->describe());
    if (m_budget.exhausted_once()) result.summary.facts.emplace_back("retry_budget", "spent");
    result.summary.seconds = io::seconds_since(std::chrono::steady_clock::time_point(started));
    return result;
}

} // namespace

ReplayResult run_replay(const ReplayOptions& options, io::Sink& output,
                        io::Diagnostics& diagnostics) {
    Replayer replayer(options, output, diagnostics);
    return replayer.run();
}

} // namespace idem::replay
