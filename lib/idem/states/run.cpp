// idem states over a stream of records (docs/states.md).

#include "idem/states/run.hpp"

#include "idem/states/detail/in_order.hpp"
#include "idem/states/detail/saved_entities.hpp"
#include "idem/states/detail/worker.hpp"

#include "idem/order/order_key.hpp"
#include "idem/order/sequencer.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/event_time.hpp"
#include "idem/run/record_run.hpp"
#include "idem/states/report.hpp"
#include "idem/store/checkpoints.hpp"
#include "idem/store/owned_outputs.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/key_index.hpp"
#include "idem/util/prefetch.hpp"
#include "idem/util/string_map.hpp"
#include "idem/util/text.hpp"

#include <cstring>
#include <fmt/format.h>

namespace idem::states {

namespace {

using detail::BlockResult;
using detail::Outcome;
using detail::Packed;
using detail::put_number;
using detail::put_text;
using detail::unpack;
using detail::WorkerState;

// --- the run --------------------------------------------------------------

// A report's evidence: the first findings of each entity, and in all at
// most so many (counts stay whole): memory follows entities, not findings.
constexpr std::size_t k_evidence_per_entity = 8;
constexpr std::size_t k_evidence_in_all = 200'000;

constexpr std::size_t k_entities_with_evidence = 100'000;

// The ordered stage of a states run. One class past ~400 lines, on
// purpose: every event goes through the checker, the sequencer, the
// in-order entities and the store's entities in one order, and the steps
// share the run's counters, outputs and evidence. What each of those is
// lives apart: the worker (worker.cpp), the checker (checker.cpp), the
// sequencer (order/), the in-order fast path (detail/in_order.hpp), the
// entities in the store (saved_entities.cpp), the packing (packed.cpp) and
// the report (report.cpp).
class StatesRun final : public order::SequencerEvents {
public:
    StatesRun(const StatesRunOptions& options, io::Sink& standard_output,
              io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_store(open_store(options)),
          m_persistent(store::parse_store_uri(options.store_uri).kind != store::StoreKind::memory &&
                       !options.learn),
          m_outputs(m_store->checkpoints(),
                    {"states", options.scope, options.input.paths, options.lock_timeout},
                    options.output_path, standard_output, diagnostics),
          m_output(&m_outputs.output()), m_invalid(m_outputs.add("invalid", options.invalid_path)),
          m_checker(options.machine, m_persistent),
          m_run({.input = options.input,
                 .reject_sink = m_outputs.add("reject", options.reject_path),
                 .strictness = options.strictness,
                 .threads = options.threads,
                 .busy_ordered_stage = true},
                diagnostics) {
        m_run.resume_after(m_outputs.resume_point());
        if (options.order_by != OrderBy::arrival) {
            order::SequencerOptions sequencer;
            sequencer.mode = options.order_by == OrderBy::version ? order::OrderMode::sequence
                                                                  : order::OrderMode::time;
            if (options.order_by == OrderBy::version) {
                sequencer.start = options.first_version;
                sequencer.gap_timeout = options.max_lateness;
            } else {
                sequencer.max_lateness = options.max_lateness;
            }
            sequencer.window = options.window;
            sequencer.max_held = std::max<std::size_t>(options.window * 1000, 1'000'000);
            m_sequencer.emplace(sequencer, *this);
            m_in_order.emplace(*m_sequencer, m_persistent);
        }
        if (m_persistent) {
            m_saved.emplace(*m_store, options.scope, "states " + options.scope, m_checker,
                            m_sequencer ? &*m_sequencer : nullptr,
                            m_in_order ? &*m_in_order : nullptr);
            m_progress = m_saved->load_progress();
            if (m_sequencer) restore_held();
        }
    }

    StatesResult run() {
        auto start = std::chrono::steady_clock::now();
        auto& census = m_run.census();
        census.expect_path("--entity", m_options.entity_field);
        census.expect_path("--state", m_options.state_field);
        // An --event no record holds makes every labelled transition illegal.
        if (m_options.operation_field) census.expect_path("--event", *m_options.operation_field);
        if (m_options.order_field) {
            auto flag = m_options.order_by == OrderBy::version ? "--version-field"
                        : m_options.order_by == OrderBy::time  ? "--order-time"
                                                               : "--hlc-field";
            census.expect_path(flag, *m_options.order_field);
        }
        if (m_options.time_field) census.expect_path("--time-field", *m_options.time_field);
        auto states = m_run.states([] { return std::make_unique<WorkerState>(); });
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockResult& result) {
            judge_block(block, state, m_options, m_checker, result);
        };
        steps.prepare = [&](const run::InputBlock&, BlockResult& result) {
            m_block = &result;
            m_block_now = now_utc();
            if (m_saved) m_saved->load_unmet(result);
        };
        auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t index) {
            look_ahead(index);
            route_record(outcome, record);
        };
        steps.commit = [&] { commit(); };
        steps.commit_every = m_options.batch;
        steps.idle = [&] {
            if (m_sequencer && m_options.order_by == OrderBy::version && !m_options.time_field)
                m_sequencer->advance_clock(now_utc());
            m_run.commit();
        };
        m_run.run(states, steps, route);
        if (m_sequencer) m_sequencer->flush();
        // Stuck entities are reported once at the end of an input. A rerun
        // that finds the input already judged (a kill after the last commit)
        // reads nothing new, and must not report them again.
        bool already_reported =
            m_persistent && m_events == 0 && m_run.records_done() == m_progress.stuck_at;
        if (!already_reported) report_stuck();
        m_progress.stuck_at = m_run.records_done();
        finish();
        auto result = summarize(start);
        m_outputs.add_carried(result.summary.counts);
        census.report(m_diagnostics, result.summary);
        if (!m_options.learn)
            for (std::size_t i = 0; i < k_finding_kinds; ++i)
                result.findings[i] =
                    result.summary.count(std::string(finding_name(static_cast<Finding>(i))));
        return result;
    }

    // The entities of the records a few places on, asked of memory now:
    // 100k entities do not fit in the cache, and waiting for each one's
    // slot, name, state and partition in turn was most of the run. Three
    // steps, each needing what the one before brought in.
    void look_ahead(std::size_t index) {
        constexpr std::size_t k_slot = 40, k_state = 20, k_partition = 8;
        const auto& outcomes = m_block->outcomes;
        if (index + k_slot < outcomes.size())
            m_checker.prefetch(outcomes[index + k_slot].entity_hash);
        if (index + k_state < outcomes.size()) {
            auto id = m_checker.prefetch_state(outcomes[index + k_state].entity_hash);
            if (id && m_in_order) m_in_order->prefetch(*id);
        }
        if (m_sequencer && index + k_partition < outcomes.size()) {
            auto id = m_checker.prefetch_state(outcomes[index + k_partition].entity_hash);
            // Only an entity whose next event goes to the sequencer.
            const auto* waiting = id ? m_in_order->waiting_partition(*id) : nullptr;
            if (waiting) {
                const auto* partition = reinterpret_cast<const char*>(waiting);
                idem::prefetch(partition);
                idem::prefetch(partition + order::Partition::k_hot_bytes - 1);
            }
        }
    }

    // SequencerEvents: an event in its entity's order.
    void release(const order::Partition&, std::string_view bytes) override {
        auto packed = unpack(bytes);
        if (!packed) return; // cannot happen: packed by this run
        forget_waiting(packed->event);
        auto judgement = m_checker.judge(packed->event);
        emit(packed->event, packed->record, judgement, false);
    }

    void gap(const order::Partition& partition, std::int64_t from, std::int64_t to) override {
        auto judgement = m_checker.gap(partition.key(), from, to);
        Event event;
        event.entity = partition.key();
        emit_finding_only(event, judgement,
                          fmt::format(R"(,"versions":{{"from":{},"to":{}}})", from, to));
    }

private:
    using Run = run::RecordRun<WorkerState, BlockResult>;

    static std::unique_ptr<store::Store> open_store(const StatesRunOptions& options) {
        auto location =
            store::parse_store_uri(options.learn ? std::string(":memory:") : options.store_uri);
        location.lock_timeout = options.lock_timeout;
        location.cache_bytes = store::k_entity_store_cache_bytes;
        return store::open_store(location);
    }

    // With a store: what a run killed with -o left waiting, back in order.
    void restore_held() {
        auto rows = m_saved->load_held();
        if (rows.empty()) return;
        for (const auto& row : rows)
            if (auto packed = unpack(row.bytes)) remember_waiting(packed->event);
        m_sequencer->restore(std::move(rows));
    }

    // The state each waiting (entity, version) claims, for a duplicate.
    static std::string waiting_key(const Event& event, order::OrderKey key) {
        return fmt::format("{}\n{}.{}", event.entity, key.primary, key.secondary);
    }
    void remember_waiting(const Event& event) {
        if (!event.version) return;
        m_waiting.emplace(waiting_key(event, {*event.version, 0}), std::string(event.state));
    }
    void forget_waiting(const Event& event) {
        if (!event.version || m_waiting.empty()) return;
        m_waiting.erase(waiting_key(event, {*event.version, 0}));
    }

    void route_record(const Outcome& outcome, run::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long:
        case Outcome::Kind::failed_to_parse: // the run frame set these aside
        case Outcome::Kind::outside_range:   // ... and counted these
            return;
        case Outcome::Kind::bad_field:
            m_run.rejects().reject(record, outcome.column, outcome.message);
            return;
        case Outcome::Kind::event:
            break;
        }
        ++m_events;
        std::string_view texts = m_block->texts;
        Event event;
        event.entity = texts.substr(outcome.entity_at, outcome.entity_size);
        event.state = texts.substr(outcome.state_at, outcome.state_size);
        event.operation = texts.substr(outcome.operation_at, outcome.operation_size);
        event.version = outcome.version;
        event.entity_hash = outcome.entity_hash;
        event.state_id = outcome.state_id;
        event.time = outcome.time.value_or(m_block_now);
        if (event.time > m_progress.latest) m_progress.latest = event.time;
        if (!m_sequencer) {
            judge_now(event, record, outcome.has_annotations);
            return;
        }
        offer(event, outcome, record);
    }

    // "file:line", written only for an event that needs it (evidence, or
    // waiting in the sequencer): most events are fine and never do.
    void set_position(Event& event, const run::InputRecord& record) {
        m_position.clear();
        fmt::format_to(std::back_inserter(m_position), "{}:{}", *record.source, record.line);
        event.position = m_position;
    }

    void judge_now(Event& event, const run::InputRecord& record, bool has_annotations,
                   std::optional<std::uint32_t> id = std::nullopt) {
        auto judgement = id ? m_checker.judge(event, *id) : m_checker.judge(event);
        if (!judgement.findings.empty()) set_position(event, record);
        emit(event, record.bytes, judgement, has_annotations);
    }

    void offer(Event& event, const Outcome& outcome, const run::InputRecord& record) {
        auto id = m_checker.index_of(event);
        m_in_order->meet(id, m_options.order_by == OrderBy::version, m_options.first_version);
        auto key = outcome.key;
        if (m_options.order_by == OrderBy::time)
            key.secondary = ++m_progress.arrivals; // ties: arrival order
        if (m_in_order->pass(id, key.primary)) {
            // Next in its entity's order, nothing waiting: judged at once.
            judge_now(event, record, outcome.has_annotations, id);
            m_sequencer->advance_clock(event.time);
            return;
        }
        auto& partition = m_in_order->partition_of(id, event.entity);
        offer_to_sequencer(event, outcome, record, partition, key);
        m_in_order->offered(id, partition);
    }

    void offer_to_sequencer(Event& event, const Outcome& outcome, const run::InputRecord& record,
                            order::Partition& partition, order::OrderKey key) {
        set_position(event, record);
        m_packed.clear();
        put_text(m_packed, event.entity);
        put_text(m_packed, event.state);
        put_text(m_packed, event.operation);
        put_text(m_packed, event.position);
        put_number(m_packed, static_cast<std::uint8_t>(event.version ? 1 : 0));
        put_number(m_packed, event.version.value_or(0));
        put_number(m_packed, event.time.time_since_epoch().count());
        put_number(m_packed, event.entity_hash);
        m_packed.append(record.bytes);
        auto released_before = m_sequencer->counts().released;
        auto verdict = m_sequencer->offer(partition, key, m_packed, event.time);
        switch (verdict.verdict) {
        case order::Verdict::accepted:
            // Still waiting for its predecessors: remembered for a duplicate.
            if (m_sequencer->counts().released == released_before) remember_waiting(event);
            break;
        case order::Verdict::late: {
            auto judgement = m_checker.judge_out_of_order(event);
            emit(event, record.bytes, judgement, outcome.has_annotations);
            break;
        }
        case order::Verdict::duplicate: {
            auto held = m_waiting.find(waiting_key(event, key));
            auto judgement = m_checker.judge_duplicate(event, held == m_waiting.end()
                                                                  ? std::string_view()
                                                                  : std::string_view(held->second));
            emit(event, record.bytes, judgement, outcome.has_annotations);
            break;
        }
        }
        if (m_options.order_by == OrderBy::version) m_sequencer->advance_clock(event.time);
    }

    // A judged record: annotated to the output, or its violation to --invalid.
    void emit(const Event& event, std::string_view bytes, const Judgement& judgement,
              bool has_annotations) {
        if (judgement.findings.empty())
            ++m_ok;
        else
            keep_evidence(event, judgement);
        if (m_options.report != ReportFormat::none || m_options.learn) return;
        m_member.assign(R"("states":{"entity":)");
        record::append_json_string(m_member, event.entity);
        m_member += R"(,"from":)";
        if (judgement.from)
            record::append_json_string(m_member, *judgement.from);
        else
            m_member += "null";
        m_member += R"(,"to":)";
        record::append_json_string(m_member, event.state);
        append_verdict(judgement);
        m_member += '}';
        auto* target = judgement.findings.empty() || !m_invalid ? m_output : m_invalid;
        record::write_annotated(*target, bytes, has_annotations || annotated(bytes), m_member);
    }

    // Whether a record already carries "_idem" (one the sequencer held lost
    // what the worker found; asked again, rarely).
    bool annotated(std::string_view bytes) {
        if (bytes.find("\"_idem\"") == std::string_view::npos) return false;
        if (m_parser.parse(bytes)) return false;
        return m_parser.has_annotations();
    }

    void append_verdict(const Judgement& judgement) {
        m_member += R"(,"verdict":)";
        record::append_json_string(m_member, judgement.findings.empty()
                                                 ? std::string_view("ok")
                                                 : finding_name(judgement.findings.front()));
        if (judgement.findings.empty()) return;
        m_member += R"(,"findings":[)";
        for (std::size_t i = 0; i < judgement.findings.size(); ++i) {
            if (i > 0) m_member += ',';
            record::append_json_string(m_member, finding_name(judgement.findings[i]));
        }
        m_member += R"(],"why":)";
        record::append_json_string(m_member, judgement.detail);
    }

    // A finding no record carries (a gap, an entity stuck): a record of its own.
    void emit_finding_only(const Event& event, const Judgement& judgement, std::string_view extra) {
        keep_evidence(event, judgement);
        if (m_options.report != ReportFormat::none || m_options.learn) return;
        m_member.assign(R"({"_idem":{"states":{"entity":)");
        record::append_json_string(m_member, event.entity);
        if (judgement.from) {
            m_member += R"(,"state":)";
            record::append_json_string(m_member, *judgement.from);
        }
        append_verdict(judgement);
        m_member += extra;
        m_member += "}}}";
        (m_invalid ? *m_invalid : *m_output).write_record(m_member);
    }

    void keep_evidence(const Event& event, const Judgement& judgement) {
        if (judgement.findings.empty() || m_options.report == ReportFormat::none) return;
        auto found = m_evidence.find(event.entity);
        if (found == m_evidence.end()) {
            if (m_evidence.size() >= k_entities_with_evidence) return;
            found = m_evidence.emplace(std::string(event.entity), WorstEntity{}).first;
            found->second.entity = std::string(event.entity);
        }
        auto& entity = found->second;
        for (auto finding : judgement.findings) {
            ++entity.findings;
            if (entity.evidence.size() >= k_evidence_per_entity ||
                m_evidence_kept >= k_evidence_in_all) {
                ++entity.evidence_more;
                continue;
            }
            Evidence evidence;
            evidence.position = std::string(event.position);
            evidence.from = judgement.from.value_or("");
            evidence.to = std::string(event.state);
            evidence.finding = finding;
            evidence.detail = judgement.detail;
            entity.evidence.push_back(std::move(evidence));
            ++m_evidence_kept;
        }
    }

    void report_stuck() {
        if (!m_options.stuck_after) return;
        for (const auto& stuck : m_checker.stuck(m_progress.latest, *m_options.stuck_after)) {
            m_checker.count(Finding::stuck);
            Judgement judgement;
            judgement.from = stuck.state;
            judgement.findings.push_back(Finding::stuck);
            judgement.detail = fmt::format("still {} since {}, {} before the last event time",
                                           stuck.state, format_rfc3339(stuck.since),
                                           format_duration(m_progress.latest - stuck.since));
            Event event;
            event.entity = stuck.entity;
            emit_finding_only(event, judgement,
                              fmt::format(R"(,"since":"{}")", format_rfc3339(stuck.since)));
        }
    }

    // Output first, then the store: entity states, the sequencer's and the
    // checkpoint in one transaction.
    void commit() {
        m_outputs.commit(m_persistent ? m_store.get() : nullptr, m_run.records_done(),
                         carried_counts(), [&] { save_state(); });
    }

    void save_state() { m_saved->save(m_progress); }

    void finish() {
        if (m_options.learn) {
            m_output->write(learned_machine_yaml(m_checker.observed()));
        } else if (m_options.report != ReportFormat::none) {
            ReportData data;
            data.machine = &m_options.machine;
            data.observed = m_checker.observed();
            data.counts = m_checker.counts();
            data.events = m_events;
            data.entities = m_checker.entities();
            data.rejected = m_run.rejects().count();
            for (auto& [name, entity] : m_evidence) {
                auto state = m_checker.find(name);
                entity.state = state ? state->state : std::string();
                data.worst.push_back(entity);
            }
            std::sort(data.worst.begin(), data.worst.end(), [](const auto& a, const auto& b) {
                return std::tie(b.findings, a.entity) < std::tie(a.findings, b.entity);
            });
            if (data.worst.size() > m_options.worst) data.worst.resize(m_options.worst);
            std::string text;
            render_report(data, m_options.report, text);
            if (m_options.report == ReportFormat::table)
                text = fit_lines(text, m_options.table_width);
            m_output->write(text);
        }
        m_outputs.commit_finished(m_persistent ? m_store.get() : nullptr, m_run.records_done(),
                                  carried_counts(), [&] { save_state(); });
        m_run.flush_rejects();
    }

    // What this run counted that a run resuming it carries on from: every
    // count but the input's, the entities' and the peak.
    store::RunCounts carried_counts() const {
        auto counts = summarize({}).summary.counts;
        std::erase_if(counts, [](const auto& count) {
            return count.first == "in" || count.first == "resumed" || count.first == "entities" ||
                   count.first == "known_before" || count.first == "peak_held";
        });
        return counts;
    }

    // This run's own counts (add_carried() makes them the whole input's).
    StatesResult summarize(std::chrono::steady_clock::time_point start) const {
        StatesResult result;
        result.findings = m_checker.counts();
        auto& summary = result.summary;
        summary.command = m_options.learn ? "states --learn" : "states";
        summary.counts = {{"in", m_run.records()}};
        if (m_run.resume_point() > 0) summary.counts.emplace_back("resumed", m_run.skipped());
        summary.counts.emplace_back("events", m_events);
        summary.counts.emplace_back("entities", m_checker.entities());
        if (m_saved && m_saved->resumed() > 0)
            summary.counts.emplace_back("known_before", m_saved->resumed());
        summary.counts.emplace_back("ok", m_ok);
        if (!m_options.learn)
            for (std::size_t i = 0; i < k_finding_kinds; ++i)
                summary.counts.emplace_back(std::string(finding_name(static_cast<Finding>(i))),
                                            result.findings[i]);
        summary.counts.emplace_back("rejected", m_run.rejects().count());
        m_run.add_window_count(summary.counts);
        if (m_options.report == ReportFormat::none && !m_options.learn) {
            summary.counts.emplace_back("out", m_output->records_written());
            if (m_invalid)
                summary.counts.emplace_back("invalid_file", m_invalid->records_written());
        }
        if (m_sequencer) summary.counts.emplace_back("peak_held", m_sequencer->counts().peak_held);
        if (m_persistent) summary.facts.emplace_back("store", m_store->describe());
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const StatesRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<store::Store> m_store;
    bool m_persistent;
    store::OwnedOutputs m_outputs;
    io::Sink* m_output;
    io::Sink* m_invalid;
    Checker m_checker;
    Run m_run;
    std::optional<order::Sequencer> m_sequencer;
    std::unordered_map<std::string, std::string> m_waiting; // entity\nversion -> state
    std::optional<detail::InOrderEntities> m_in_order;      // with a sequencer
    StringMap<WorstEntity> m_evidence;
    const BlockResult* m_block = nullptr;
    Timestamp m_block_now;
    // Saved with the entities, committed with the output that reflects it.
    detail::RunProgress m_progress;
    std::optional<detail::SavedEntities> m_saved; // with a store
    std::string m_position, m_packed, m_member;
    record::RecordParser m_parser;
    std::uint64_t m_evidence_kept = 0;
    std::uint64_t m_events = 0, m_ok = 0;
};

} // namespace

StatesResult run_states(const StatesRunOptions& options, io::Sink& standard_output,
                        io::Diagnostics& diagnostics) {
    return StatesRun(options, standard_output, diagnostics).run();
}

} // namespace idem::states
