// idem merge over a stream of records (docs/merge.md).

#include "idem/merge/run.hpp"

#include "idem/merge/detail/judge.hpp"
#include "idem/merge/detail/render.hpp"
#include "idem/merge/windows.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/run/record_run.hpp"
#include "idem/store/checkpoints.hpp"
#include "idem/store/open_windows.hpp"
#include "idem/store/owned_outputs.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <utility>

namespace idem::merge {

namespace {

using detail::BlockResult;
using detail::describe_window;
using detail::judge_block;
using detail::Outcome;
using detail::Renderer;
using detail::WorkerState;
using OrderedJson = nlohmann::ordered_json;

// --- the run --------------------------------------------------------------

struct RuleCounts {
    std::uint64_t in = 0, merged = 0, out = 0, bypassed = 0, late = 0, rejected = 0;
};

class MergeRun {
public:
    MergeRun(const MergeRunOptions& options, io::Sink& standard_output,
             io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_store(open_store(options)),
          m_outputs(m_store->checkpoints(),
                    {"merge", options.scope, options.input.paths, options.lock_timeout},
                    options.output_path, standard_output, diagnostics),
          m_output(&m_outputs.output()), m_late(m_outputs.add("late", options.late_path)),
          m_unmatched(m_outputs.add("unmatched", options.unmatched_path)),
          m_members(m_outputs.add("members", options.members_path)),
          m_merger(options.rules, merger_options(options)),
          m_run({options.input, m_outputs.add("reject", options.reject_path), options.strictness,
                 options.threads},
                diagnostics),
          m_counts(options.rules.size()) {
        m_run.resume_after(m_outputs.resume_point());
        if (m_outputs.owned() && m_outputs.resumed()) {
            std::string meta;
            auto windows = m_store->open_windows().load_windows(m_outputs.checkpoint_name(), meta);
            m_merger.restore(windows, meta);
            m_restored = windows.size();
        }
    }

    // Every path and value the rules and flags name, for the census: a
    // typo in any of them never passes as a rule that merges nothing.
    void expect_paths() {
        auto& census = m_run.census();
        auto expect = [&census](const std::string& flag, const Condition& condition) {
            if (condition.value)
                census.expect_value(flag, condition.path, *condition.value);
            else
                census.expect_path(flag, condition.path);
        };
        for (const auto& condition : m_options.bypass)
            expect("--bypass", condition);
        for (const auto& rule : m_options.rules) {
            bool from_flags = rule.name == "merge" && m_options.rules.size() == 1;
            auto flag = [&](std::string_view flag_name, std::string_view key) {
                return from_flags ? std::string(flag_name)
                                  : fmt::format("rule {} {}", quote(rule.name), key);
            };
            for (const auto& condition : rule.match)
                expect(flag("--match", "match"), condition);
            for (const auto& path : rule.group)
                census.expect_path(flag("--group", "group"), path);
            for (const auto& aggregate : rule.aggregates)
                if (aggregate.input && !aggregate.whole_event)
                    census.expect_path(flag("--agg", "aggregate"), *aggregate.input);
        }
        if (m_options.time_field) census.expect_path("--time-field", *m_options.time_field);
    }

    MergeResult run() {
        auto start = std::chrono::steady_clock::now();
        expect_paths();
        auto states = m_run.states([] { return std::make_unique<WorkerState>(); });
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockResult& result) {
            judge_block(block, state, m_options, result);
        };
        steps.prepare = [&](const run::InputBlock&, BlockResult& result) {
            m_block = &result;
            m_block_now = now_utc();
        };
        auto route = [&](Outcome& outcome, run::InputRecord& record, std::size_t) {
            route_record(outcome, record);
        };
        steps.block_done = [&](std::uint64_t) { emit_closed(); };
        steps.commit = [&] { commit(); };
        steps.commit_every = m_options.batch;
        // Live input gone quiet: windows that have waited their span by the
        // wall clock close, and what was merged goes out.
        steps.idle = [&] {
            m_merger.close_idle(std::chrono::steady_clock::now());
            m_run.commit();
        };
        m_run.run(states, steps, route);
        m_merger.close_all();
        emit_closed();
        finish();
        auto result = summarize(start);
        m_outputs.add_carried(result.summary.counts);
        m_run.census().report(m_diagnostics, result.summary);
        result.late = result.summary.count("late");
        for (auto& [name, ratio] : result.summary.ratios)
            if (name == "drop_rate" && result.summary.count("in") > 0)
                ratio = static_cast<double>(result.summary.count("merged_away")) /
                        static_cast<double>(result.summary.count("in"));
        return result;
    }

private:
    using Run = run::RecordRun<WorkerState, BlockResult>;

    static std::unique_ptr<store::Store> open_store(const MergeRunOptions& options) {
        // Open windows need a store only to survive a kill, with -o.
        auto location =
            store::parse_store_uri(options.output_path.empty() ? ":memory:" : options.store_uri);
        location.lock_timeout = options.lock_timeout;
        location.cache_bytes = store::k_commit_only_store_cache_bytes;
        return store::open_store(location);
    }

    static MergerOptions merger_options(const MergeRunOptions& options) {
        MergerOptions merger;
        merger.max_lateness = options.max_lateness;
        merger.max_open = options.max_open;
        merger.max_open_bytes = options.max_open_bytes;
        merger.zone = options.zone;
        merger.track_changes = !options.output_path.empty();
        if (options.preview) merger.preview_members = 20;
        return merger;
    }

    void route_record(const Outcome& outcome, run::InputRecord& record) {
        switch (outcome.kind) {
        case Outcome::Kind::too_long:
        case Outcome::Kind::failed_to_parse: // the run frame set these aside
        case Outcome::Kind::outside_range:   // ... and counted these
            return;
        case Outcome::Kind::bad_field:
            if (outcome.has_rule) {
                ++m_counts[outcome.rule].in;
                ++m_counts[outcome.rule].rejected;
            }
            m_run.rejects().reject(record, outcome.column, outcome.message);
            return;
        case Outcome::Kind::bypass:
            ++m_bypassed;
            if (outcome.has_rule) {
                ++m_counts[outcome.rule].in;
                ++m_counts[outcome.rule].bypassed;
            }
            if (!m_options.preview) {
                m_member.assign(R"("merge":{"bypassed":true})");
                record::write_annotated(*m_output, record.bytes, outcome.has_annotations, m_member);
            }
            return;
        case Outcome::Kind::unmatched:
            ++m_unmatched_count;
            if (m_unmatched)
                m_unmatched->write_record(record.bytes);
            else if (!m_options.preview)
                m_output->write_record(record.bytes);
            return;
        case Outcome::Kind::unkeyed:
            ++m_unkeyed;
            ++m_counts[outcome.rule].in;
            if (!m_options.preview) m_output->write_record(record.bytes);
            return;
        case Outcome::Kind::member:
            merge(outcome, record);
            return;
        }
    }

    void merge(const Outcome& outcome, const run::InputRecord& record) {
        const auto& rule = m_options.rules[outcome.rule];
        auto& counts = m_counts[outcome.rule];
        ++counts.in;
        Member member;
        member.rule = outcome.rule;
        member.group =
            std::string_view(m_block->texts).substr(outcome.group_at, outcome.group_size);
        member.time = outcome.time.value_or(m_block_now);
        member.bytes = record.bytes;
        member.source = record.source;
        member.line = record.line;
        member.values = m_block->values.data() + outcome.values_at;
        auto& ids = m_ids;
        if (m_merger.add(member, m_members ? &ids : nullptr) == 0) {
            ++counts.late;
            route_late(outcome, record, rule, member.time);
        } else {
            ++counts.merged;
            if (m_members) {
                m_member.assign(R"("merge":{"into":[)");
                for (std::size_t i = 0; i < ids.size(); ++i) {
                    if (i > 0) m_member += ',';
                    record::append_json_string(m_member, ids[i]);
                }
                m_member += "]}";
                record::write_annotated(*m_members, record.bytes, outcome.has_annotations,
                                        m_member);
            }
        }
        m_merger.advance(member.time);
    }

    void route_late(const Outcome& outcome, const run::InputRecord& record, const MergeRule& rule,
                    Timestamp time) {
        auto watermark = m_merger.watermark();
        // Nothing is lost unasked: without --late FILE a late record goes to
        // the output as a window of its own, marked; --drop-late drops it.
        if (m_options.drop_late || (!m_late && m_options.preview)) {
            m_diagnostics.warning(
                {*record.source, record.line, 0, record.byte_offset},
                fmt::format("late: its window of rule {} had closed (event time {}, watermark {}); "
                            "dropped{}",
                            quote(rule.name), format_rfc3339(time),
                            watermark ? format_rfc3339(*watermark) : std::string("none"),
                            m_options.drop_late ? " (--drop-late)" : " from the preview"));
            return;
        }
        m_member.assign(R"("merge":{"late":true,"rule":)");
        record::append_json_string(m_member, rule.name);
        m_member += R"(,"at":)";
        record::append_json_string(m_member, format_rfc3339(time));
        if (watermark) {
            m_member += R"(,"watermark":)";
            record::append_json_string(m_member, format_rfc3339(*watermark));
        }
        m_member += R"(,"source":)";
        record::append_json_string(m_member, fmt::format("{}:{}", *record.source, record.line));
        m_member += '}';
        record::write_annotated(m_late ? *m_late : *m_output, record.bytes, outcome.has_annotations,
                                m_member);
    }

    void emit_closed() {
        for (auto& window : m_merger.take_closed()) {
            const auto& rule = m_options.rules[window.rule];
            ++m_counts[window.rule].out;
            if (m_options.preview) {
                preview(window, rule);
                continue;
            }
            m_output->write_record(m_renderer.render(window, rule));
            warn_of_collision(rule);
        }
    }

    // Once per run: a record has a field an action's figure is named after.
    void warn_of_collision(const MergeRule& rule) {
        auto names = m_renderer.take_collisions();
        if (names.empty() || m_collision_warned) return;
        m_collision_warned = true;
        std::string quoted;
        for (const auto& name : names)
            quoted += (quoted.empty() ? "" : ", ") + quote(name);
        m_diagnostics.warning(
            {}, fmt::format("rule {}: records have their own {} field{}; they stay as they were, "
                            "and the rule's figures are under _idem.merge",
                            quote(rule.name), quoted, names.size() == 1 ? "" : "s"));
    }

    // --preview: each window that merged two records or more, with its
    // members and what it would become, up to --preview-limit.
    void preview(const WindowState& window, const MergeRule& rule) {
        if (window.count < 2 || m_previewed >= m_options.preview_limit) return;
        ++m_previewed;
        auto merged = m_renderer.render(window, rule);
        if (m_options.preview_format == PreviewFormat::table) {
            // A table for a person: every value through terminal_text.
            m_output->write(terminal_text(describe_window(window, rule)) + "\n");
            for (const auto& member : window.held)
                m_output->write("    " + terminal_text(member) + "\n");
            if (window.count > window.held.size())
                m_output->write(
                    fmt::format("    ... {} more\n", window.count - window.held.size()));
            m_output->write("  => " + terminal_text(merged) + "\n\n");
            return;
        }
        OrderedJson line;
        line["preview"] = window_id(rule.name, window);
        line["merged"] = OrderedJson::parse(merged);
        line["members"] = OrderedJson::array();
        for (const auto& member : window.held)
            line["members"].push_back(OrderedJson::parse(member));
        if (window.count > window.held.size())
            line["members_more"] = window.count - window.held.size();
        m_output->write_record(json_report_text(line.dump())); // a report: read on terminals
    }

    // Output first (the windows closed so far included), then the store:
    // with -o the open windows, the output sizes and the records done
    // commit together.
    void commit() {
        emit_closed();
        m_outputs.commit(m_outputs.owned() ? m_store.get() : nullptr, m_run.records_done(),
                         carried_counts(), [&] { save_windows(); });
    }

    void save_windows() {
        auto changes = m_merger.drain_changes();
        store::WindowChanges saved;
        saved.saved = std::move(changes.saved);
        saved.removed = std::move(changes.removed);
        saved.meta = std::move(changes.meta);
        m_store->open_windows().save_windows(m_outputs.checkpoint_name(), saved);
    }

    void finish() {
        m_outputs.commit_finished(
            m_outputs.owned() ? m_store.get() : nullptr, m_run.records_done(), carried_counts(),
            [&] { m_store->open_windows().clear_windows(m_outputs.checkpoint_name()); });
        m_run.flush_rejects();
    }

    // What this run counted that a run resuming it carries on from.
    store::RunCounts carried_counts() const {
        return store::only_named(summarize({}).summary.counts,
                                 {"merged", "merged_away", "out", "bypassed", "late", "unmatched",
                                  "unkeyed", "rejected", "outside_range"});
    }

    // This run's own counts (add_carried() makes them the whole input's).
    MergeResult summarize(std::chrono::steady_clock::time_point start) const {
        MergeResult result;
        auto& summary = result.summary;
        summary.command = "merge";
        RuleCounts total;
        for (const auto& counts : m_counts) {
            total.merged += counts.merged;
            total.out += counts.out;
            total.late += counts.late;
        }
        result.late = total.late;
        summary.counts = {{"in", m_run.records()}};
        if (m_run.resume_point() > 0) summary.counts.emplace_back("resumed", m_run.skipped());
        if (m_restored > 0) summary.counts.emplace_back("restored_windows", m_restored);
        summary.counts.emplace_back("merged", total.merged);
        summary.counts.emplace_back("merged_away",
                                    total.merged > total.out ? total.merged - total.out : 0);
        summary.counts.emplace_back(m_options.preview ? "would_be_out" : "out", total.out);
        summary.counts.emplace_back("bypassed", m_bypassed);
        summary.counts.emplace_back("late", total.late);
        summary.counts.emplace_back("unmatched", m_unmatched_count);
        if (m_options.missing == MissingGroup::pass)
            summary.counts.emplace_back("unkeyed", m_unkeyed);
        summary.counts.emplace_back("rejected", m_run.rejects().count());
        m_run.add_window_count(summary.counts);
        summary.counts.emplace_back("peak_open_windows", m_merger.peak_open());
        summary.counts.emplace_back("peak_open_bytes", m_merger.peak_open_bytes());
        auto in = m_run.records();
        summary.ratios.emplace_back(
            "drop_rate",
            in == 0 ? 0.0
                    : static_cast<double>(total.merged > total.out ? total.merged - total.out : 0) /
                          static_cast<double>(in));
        if (m_options.rules.size() > 1 || !m_options.rules.front().name.empty()) {
            summary.parts_name = "rule";
            for (std::size_t i = 0; i < m_counts.size(); ++i) {
                const auto& counts = m_counts[i];
                io::Summary::Part part;
                part.name = m_options.rules[i].name;
                part.counts = {{"in", counts.in},
                               {"merged", counts.merged},
                               {"out", counts.out},
                               {"late", counts.late},
                               {"rejected", counts.rejected}};
                auto away = counts.merged > counts.out ? counts.merged - counts.out : 0;
                part.counts.insert(part.counts.begin() + 2, {"merged_away", away});
                part.counts.insert(part.counts.begin() + 4, {"bypassed", counts.bypassed});
                part.ratios.emplace_back("drop_rate", counts.in == 0
                                                          ? 0.0
                                                          : static_cast<double>(away) /
                                                                static_cast<double>(counts.in));
                summary.parts.push_back(std::move(part));
            }
        }
        if (m_outputs.owned()) summary.facts.emplace_back("store", m_store->describe());
        summary.seconds = io::seconds_since(start);
        return result;
    }

    const MergeRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
    std::unique_ptr<store::Store> m_store;
    store::OwnedOutputs m_outputs;
    io::Sink* m_output;
    io::Sink* m_late;
    bool m_collision_warned = false;
    io::Sink* m_unmatched;
    io::Sink* m_members;
    Merger m_merger;
    Run m_run;
    std::vector<RuleCounts> m_counts;
    Renderer m_renderer;
    std::vector<std::string> m_ids; // the windows a member joined (with --members)
    BlockResult* m_block = nullptr;
    Timestamp m_block_now;
    std::string m_member;
    std::uint64_t m_bypassed = 0, m_unmatched_count = 0, m_unkeyed = 0, m_restored = 0;
    std::size_t m_previewed = 0;
};

} // namespace

MergeResult run_merge(const MergeRunOptions& options, io::Sink& standard_output,
                      io::Diagnostics& diagnostics) {
    return MergeRun(options, standard_output, diagnostics).run();
}

} // namespace idem::merge
