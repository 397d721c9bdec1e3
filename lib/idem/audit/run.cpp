// idem audit over a stream of records (docs/audit.md).

#include "idem/audit/run.hpp"

#include "idem/audit/detail/grouping.hpp"
#include "idem/audit/detail/kept_stores.hpp"
#include "idem/audit/detail/payloads.hpp"
#include "idem/audit/detail/reading.hpp"
#include "idem/audit/per_delivery.hpp"
#include "idem/audit/spill.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/run/record_run.hpp"
#include "idem/run/rows.hpp"
#include "idem/run/stdin_copy.hpp"
#include "idem/store/store.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <set>
#include <unordered_map>
#include <xxhash.h>

namespace idem::audit {

namespace {

using detail::BlockReadings;
using detail::read_block;
using detail::read_line;
using detail::Reading;
using detail::text_of;
using detail::WorkerState;

class AuditRun {
public:
    AuditRun(const AuditRunOptions& options, io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_census(options.input.allow_absent) {
        // The records of groups are read again (their fields compared,
        // per-delivery fields learned): standard input is kept in a file.
        const auto& paths = options.input.paths;
        if (options.read_records &&
            (paths.empty() || std::find(paths.begin(), paths.end(), "-") != paths.end())) {
            m_stdin_copy.emplace(options.spill_directory.empty() ? std::filesystem::path("/tmp")
                                                                 : options.spill_directory);
            m_options.input.stdin_fd = m_stdin_copy->fd();
        }
        // The paths check_paths() does not judge (it judges those a group
        // needs): what counts as the payload, and the answered status.
        using Scope = record::PathCensus::Scope;
        for (const auto& path : options.payload_fields)
            m_census.expect_path("--payload", path, Scope::event);
        for (const auto& path : options.ignore_fields)
            m_census.expect_path("--ignore", path, Scope::event);
        for (const auto& path : options.volatile_fields)
            m_census.expect_path("--volatile", path, Scope::event);
        if (options.status_field) m_census.expect_path("--status-field", *options.status_field);
        // Judged by check_paths(); here to tell a time that is not there
        // from one that does not read.
        if (options.time_field) m_census.expect_path("--time-field", *options.time_field);
        // The paths check_paths() judges are here too, only for the
        // census's sample of what records hold ("did you mean").
        if (!options.key_fields.empty()) m_census.expect_path("--key", options.key_fields.front());
        if (!options.fingerprint_fields.empty())
            m_census.expect_path("--fingerprint", options.fingerprint_fields.front());
        // Rows (--csv, --sqlite) are never rejected: the file is made empty.
        m_reject_sink = io::Sink::create_file_if_named(options.reject_path);
        if (options.read_records)
            m_run.emplace(run::RecordRunSetup{m_options.input, m_reject_sink.get(),
                                              options.strictness, options.threads},
                          diagnostics);
    }

    // Reads every input, then groups and explains: in memory, or (past
    // --spill-after) partition by partition with the groups left on disk.
    // The shelf stays valid while this run lives.
    GroupShelf& find_groups(FindingsSummary& summary) {
        if (m_run) read_records();
        read_rows();
        check_paths();
        m_options.explain.layer_most = m_layer_most;
        m_replayed = detail::read_replay_ledger(m_options, m_diagnostics);
        m_verdicts = detail::read_verdicts(m_options, m_diagnostics);
        if (m_run) m_run->flush_rejects();
        if (m_spill) {
            Spill::Context context;
            context.options = m_options.explain;
            context.inputs = m_findings.inputs;
            context.sources = std::move(m_sources.values());
            context.records = m_records;
            context.identified = m_identified;
            context.replayed = &m_replayed;
            if (!m_options.verdicts_uri.empty()) context.verdicts = &m_verdicts;
            context.differences = &m_differences;
            // The input is read: the calling thread, which read it, is
            // free to explain partitions beside the workers. The groups
            // are explained on the payloads as read, and tell what they
            // mix; only when that teaches per-delivery fields are they
            // explained again without them (no log pays for a survey).
            auto threads = run::worker_count(m_options.threads) + 1;
            auto again = context;
            PayloadSurvey survey;
            context.survey = &survey;
            m_shelf = m_spill->explain_groups(std::move(context), summary, threads);
            add_what_if_groups(survey);
            m_per_delivery = learn_per_delivery(m_options, survey, again.inputs, m_diagnostics);
            if (m_per_delivery.classes.empty()) return *m_shelf;
            m_shelf.reset(); // its mapping of the group file goes before the file is made anew
            again.per_delivery = &m_per_delivery;
            summary = {};
            m_shelf = m_spill->explain_groups(std::move(again), summary, threads);
            return *m_shelf;
        }
        m_findings = explain_in_memory();
        m_findings.replayed = &m_replayed;
        m_findings.differences = &m_differences;
        if (!m_options.verdicts_uri.empty()) m_findings.verdicts = &m_verdicts;
        summary = summarize(m_findings);
        m_shelf = std::make_unique<FindingsShelf>(m_findings);
        return *m_shelf;
    }

    // The fields that differ between the payloads of each group that mixes
    // them (detail::compare_payloads).
    void compare_payloads(GroupShelf& groups) {
        detail::compare_payloads(m_options, m_per_delivery, groups, m_differences, m_diagnostics);
    }
    [[nodiscard]] const PerDelivery& per_delivery() const { return m_per_delivery; }

    [[nodiscard]] std::uint64_t rejected() const { return m_run ? m_run->rejects().count() : 0; }
    [[nodiscard]] std::uint64_t outside_range() const { return m_run ? m_run->outside_range() : 0; }
    [[nodiscard]] const record::PathCensus& census() const { return m_census; }
    [[nodiscard]] bool spilled() const { return m_spill.has_value(); }
    [[nodiscard]] std::optional<Timestamp> first_time() const { return m_first_time; }

    // --what-if key=PATHS, judged; keys shown as the report shows keys.
    [[nodiscard]] std::vector<WhatIf::KeySetting> what_if_keys() const {
        std::vector<WhatIf::KeySetting> settings;
        for (std::size_t k = 0; k < m_what_if_keys.size(); ++k) {
            auto setting = m_what_if_keys[k].finish(
                [&](std::uint64_t intent) { return m_per_delivery.class_of(intent); });
            auto paths = m_options.what_if_key_fields[k].size();
            for (auto& example : setting.examples)
                example.key = record::encoded_values_json(example.key, paths);
            for (auto& key : setting.conflict_examples)
                key = record::encoded_values_json(key, paths);
            settings.push_back(std::move(setting));
        }
        return settings;
    }
    [[nodiscard]] std::optional<Timestamp> last_time() const { return m_last_time; }
    [[nodiscard]] std::uint64_t lines() const { return (m_run ? m_run->records() : 0) + m_rows; }

private:
    Findings explain_in_memory() {
        m_findings.fingerprinted = !m_options.fingerprint_fields.empty();
        m_findings.options = m_options.explain;
        m_findings.sources = std::move(m_sources.values());
        m_findings.records = m_findings.attempts.size();
        for (std::size_t i = 0; i < m_findings.attempts.size() && !m_verdicts.empty(); ++i)
            m_findings.attempts[i].trace.signed_copy.verdict =
                signature_verdict(m_verdicts, m_findings.inputs, m_findings.positions[i]);
        assign_ids();
        // The groups are explained on the payloads as read and tell what
        // they mix, as the spilled path's partitions do; only when that
        // teaches per-delivery fields are they explained again without them.
        PayloadSurvey survey;
        group(&survey);
        add_what_if_groups(survey);
        m_per_delivery = learn_per_delivery(m_options, survey, m_findings.inputs, m_diagnostics);
        if (!m_per_delivery.classes.empty()) {
            for (auto& attempt : m_findings.attempts)
                attempt.payload = m_per_delivery.class_of(attempt.payload);
            m_findings.groups.clear();
            group(nullptr);
        }
        name_grouped();
        return std::move(m_findings);
    }

    void read_records() {
        auto states = m_run->states(
            [&] { return std::make_unique<WorkerState>(detail::payload_spec(m_options)); });
        for (auto& state : states) // records and rows, one census
            state->parser.report_paths_to(&m_census);
        Run::Steps steps;
        steps.judge = [&](const run::InputBlock& block, WorkerState& state, BlockReadings& result) {
            read_block(block, state, m_options, result);
        };
        auto route = [&](Reading& reading, run::InputRecord& record, std::size_t) {
            take_record(reading, record);
        };
        steps.prepare = [&](const run::InputBlock& block, BlockReadings& result) {
            if (m_records == 0 && !m_spill) reserve_columns(block, result);
            m_block_texts = &result.texts;
        };
        m_run->run(states, steps, route);
    }

    // CSV rows and query rows, as JSON objects, on this thread.
    void read_rows() {
        WorkerState state(detail::payload_spec(m_options, detail::row_identity_of(m_options)));
        state.parser.report_paths_to(&m_census);
        std::string padded, texts;
        auto take_row = [&](std::string_view json, const run::RowPosition& position) {
            padded.assign(json);
            padded.append(io::k_padding_bytes, ' ');
            io::BlockLine line;
            line.bytes = std::string_view(padded).substr(0, json.size());
            Reading reading;
            texts.clear();
            read_line(line, reading, texts, state, m_options);
            ++m_rows;
            take(reading, texts, {input_index(position.input), position.row, position.number});
        };
        for (const auto& path : m_options.csv_paths)
            run::read_csv_rows(path, take_row);
        if (!m_options.sqlite_path.empty())
            run::read_sqlite_rows(m_options.sqlite_path, m_options.sqlite_query, take_row);
        if (!m_options.store_uri.empty())
            detail::read_dedup_evidence(m_options, m_diagnostics, take_row);
    }

    struct MissingCounts {
        std::uint64_t key = 0, fingerprint = 0, time = 0, source = 0, route = 0;
        std::array<std::uint64_t, k_max_layers> layers{};
        std::array<std::uint64_t, k_max_what_if_keys> what_if_keys{};
    };

    void count_missing(const Reading& reading) {
        if (!m_options.key_fields.empty() && reading.key.size == 0) ++m_missing.key;
        if (!m_options.fingerprint_fields.empty() && reading.fingerprint.size == 0)
            ++m_missing.fingerprint;
        if (m_options.time_field && !reading.time) ++m_missing.time;
        if (m_options.source_field && reading.source.size == 0) ++m_missing.source;
        if (m_options.route_field && !reading.route_found) ++m_missing.route;
        for (std::size_t k = 0; k < m_options.attempt_fields.size() && k < k_max_layers; ++k)
            if (reading.layers[k] == 0) ++m_missing.layers[k];
        for (std::size_t k = 0; k < m_options.what_if_key_fields.size() && k < k_max_what_if_keys;
             ++k)
            if (reading.what_if_keys[k].size == 0) ++m_missing.what_if_keys[k];
    }

    // A path that matches no record is a typo until shown otherwise: the run
    // fails instead of reporting "nothing happened twice". A path missing
    // from some records is a warning with the count.
    void check_paths() {
        if (m_records == 0) return;
        auto paths_text = [](const std::vector<record::FieldPath>& paths) {
            std::string text;
            for (const auto& path : paths)
                text += (text.empty() ? "" : ",") + path.text();
            return quote(text);
        };
        struct Check {
            std::string_view flag;
            std::string paths;
            std::uint64_t missing;
            std::string_view without;
            std::string first_path; // of paths, for "did you mean"
        };
        std::vector<Check> checks;
        if (!m_options.key_fields.empty())
            checks.push_back({"--key", paths_text(m_options.key_fields), m_missing.key,
                              "belong to no key group", m_options.key_fields.front().text()});
        if (!m_options.fingerprint_fields.empty())
            checks.push_back({"--fingerprint", paths_text(m_options.fingerprint_fields),
                              m_missing.fingerprint, "belong to no intent group",
                              m_options.fingerprint_fields.front().text()});
        if (m_options.time_field)
            checks.push_back({"--time-field", quote(m_options.time_field->text()), m_missing.time,
                              "have no time: no gaps, no ttl-expired, no races for them",
                              m_options.time_field->text()});
        if (m_options.source_field)
            checks.push_back({"--source-field", quote(m_options.source_field->text()),
                              m_missing.source, "have no source", m_options.source_field->text()});
        if (m_options.route_field)
            checks.push_back({"--route-field", quote(m_options.route_field->text()),
                              m_missing.route, "are told apart by their endpoint only",
                              m_options.route_field->text()});
        for (std::size_t k = 0; k < m_options.attempt_fields.size() && k < k_max_layers; ++k)
            checks.push_back({"--attempt-field", quote(m_options.attempt_fields[k].text()),
                              m_missing.layers[k], "count as no attempt of that layer",
                              m_options.attempt_fields[k].text()});
        for (std::size_t k = 0; k < m_options.what_if_key_fields.size() && k < k_max_what_if_keys;
             ++k)
            checks.push_back({"--what-if", "key=" + paths_text(m_options.what_if_key_fields[k]),
                              m_missing.what_if_keys[k], "are left out of that what-if",
                              m_options.what_if_key_fields[k].front().text()});
        for (const auto& check : checks) {
            if (check.missing == m_records && check.flag == std::string_view("--time-field") &&
                m_census.held(*m_options.time_field))
                throw InputError(
                    {m_findings.inputs.empty() ? "<input>" : m_findings.inputs.front(), 0, 0, 0},
                    fmt::format("--time-field {}: unreadable time in all {} records (it is there, "
                                "but is not RFC 3339, SQL's 2026-11-30 09:00:00, or an epoch "
                                "number)",
                                check.paths, m_records));
            if (check.missing == m_records) {
                auto closest = m_census.closest_to(check.first_path);
                throw InputError(
                    {m_findings.inputs.empty() ? "<input>" : m_findings.inputs.front(), 0, 0, 0},
                    fmt::format("{} {} is in none of the {} records (or holds no "
                                "usable value){}",
                                check.flag, check.paths, m_records,
                                closest.empty() || closest == check.first_path
                                    ? std::string(": check the path against one record")
                                    : fmt::format("; did you mean {}?", quote(closest))));
            }
            if (check.missing > 0)
                m_diagnostics.warning(
                    {}, fmt::format("{} {} is missing in {} of {} records: they {}", check.flag,
                                    check.paths, check.missing, m_records, check.without));
        }
    }

    void take(const Reading& reading, const std::string& texts, Findings::Position position) {
        count_missing(reading);
        for (std::size_t k = 0; k < k_max_layers; ++k)
            m_layer_most[k] = std::max(m_layer_most[k], reading.layers[k]);
        if (!m_what_if_keys.empty()) {
            // One intent as the groups call one (AlternativeKeyJudge).
            auto fingerprint = text_of(texts, reading.fingerprint);
            AlternativeKeyJudge::FirstOfIntent record{
                fingerprint.empty() ? reading.payload
                                    : XXH3_64bits(fingerprint.data(), fingerprint.size()),
                m_records, position};
            for (std::size_t k = 0; k < m_what_if_keys.size(); ++k)
                m_what_if_keys[k].add(text_of(texts, reading.what_if_keys[k]), reading.time,
                                      record);
        }
        if (reading.time) {
            if (!m_first_time || *reading.time < *m_first_time) m_first_time = reading.time;
            if (!m_last_time || *reading.time > *m_last_time) m_last_time = reading.time;
        }
        if (m_spill) {
            auto fingerprint = text_of(texts, reading.fingerprint);
            auto key = text_of(texts, reading.key);
            if (!(m_findings.fingerprinted ? fingerprint : key).empty()) ++m_identified;
            SpilledRecord record{m_records++,
                                 position,
                                 reading.time,
                                 payload_of(reading),
                                 key,
                                 fingerprint,
                                 m_sources.intern(text_of(texts, reading.source)),
                                 reading.status,
                                 trace_of(reading, texts)};
            m_spill->add(record);
            return;
        }
        ++m_records;
        Attempt attempt;
        m_keys.add(text_of(texts, reading.key));
        m_fingerprints.add(text_of(texts, reading.fingerprint));
        attempt.source = m_sources.intern(text_of(texts, reading.source));
        attempt.time = reading.time;
        attempt.payload = payload_of(reading);
        attempt.status = reading.status;
        attempt.trace = trace_of(reading, texts);
        m_findings.attempts.push_back(attempt);
        m_findings.positions.push_back(position);
        if (m_findings.attempts.size() > m_options.spill_after) start_spilling();
    }

    static std::uint64_t payload_of(const Reading& reading) { return reading.payload; }

    // Endpoints and subscriptions are few, like sources: interned with them.
    DeliveryTrace trace_of(const Reading& reading, const std::string& texts) {
        return {reading.provider,
                reading.provider_attempt,
                m_sources.intern(text_of(texts, reading.endpoint)),
                m_sources.intern(text_of(texts, reading.subscription)),
                reading.layers,
                reading.signed_copy};
    }

    // From the first block's records per byte and the inputs' size: whether
    // to group on disk from the start, else the columns' room up to
    // --spill-after, taken at once (grown by doubling, each step copied
    // them and faulted in their pages afresh).
    void reserve_columns(const run::InputBlock& block, const BlockReadings& first) {
        auto whole = m_run->expected_records(block, first.outcomes.size());
        if (!whole) return;
        // Inputs that hold well past --spill-after (twice: the estimate is
        // the first block's) are grouped on disk from the first record:
        // columns filled only to be moved to the partitions held a quarter
        // of a million-event run's peak memory.
        m_expected_records = whole;
        if (*whole / 2 > m_options.spill_after) {
            start_spilling();
            return;
        }
        auto expected = static_cast<std::size_t>(std::min(*whole, m_options.spill_after + 1));
        auto texts_per_record =
            static_cast<double>(first.texts.size()) / static_cast<double>(first.outcomes.size());
        reserve_huge(m_findings.attempts, expected);
        reserve_huge(m_findings.positions, expected);
        auto text_bytes =
            static_cast<std::size_t>(texts_per_record * static_cast<double>(expected));
        m_keys.reserve(expected, text_bytes);
        m_fingerprints.reserve(expected, m_options.fingerprint_fields.empty() ? 0 : text_bytes);
    }

    // Moves what is in memory to the partition files; every later record
    // goes straight there.
    void start_spilling() {
        SpillLayout layout;
        layout.by_fingerprint = !m_options.fingerprint_fields.empty();
        layout.keys_given = !m_options.key_fields.empty();
        layout.key_paths = m_options.key_fields.size();
        layout.fingerprint_paths = m_options.fingerprint_fields.size();
        m_findings.fingerprinted = layout.by_fingerprint;
        auto directory = m_options.spill_directory.empty() ? std::filesystem::path("/tmp")
                                                           : m_options.spill_directory;
        m_spill.emplace(layout, directory,
                        spill_partitions(m_expected_records, layout.by_fingerprint ? 2 : 1));
        const auto& attempts = m_findings.attempts;
        for (std::size_t i = 0; i < attempts.size(); ++i) {
            auto key = m_keys.text(i);
            auto fingerprint = m_fingerprints.text(i);
            if (!(layout.by_fingerprint ? fingerprint : key).empty()) ++m_identified;
            m_spill->add({i, m_findings.positions[i], attempts[i].time, attempts[i].payload, key,
                          fingerprint, attempts[i].source, attempts[i].status, attempts[i].trace});
        }
        std::vector<Attempt>().swap(m_findings.attempts);
        std::vector<Findings::Position>().swap(m_findings.positions);
        m_keys = {};
        m_fingerprints = {};
    }

    // Inputs come one after another: the last one is nearly always it.
    std::uint32_t input_index(const std::string& name) {
        auto& inputs = m_findings.inputs;
        if (inputs.empty() || inputs.back() != name) inputs.push_back(name);
        return static_cast<std::uint32_t>(inputs.size() - 1);
    }

    void take_record(const Reading& reading, const run::InputRecord& record) {
        if (!reading.parsed) {
            // Too long to hold: the run frame set it aside.
            if (!reading.message.empty())
                m_run->rejects().reject(record, reading.column, reading.message);
            return;
        }
        take(reading, *m_block_texts, {input_index(*record.source), false, record.line});
    }

    // Keys and intents as ids, and how many distinct intents there are.
    void assign_ids() {
        auto& attempts = m_findings.attempts;
        auto distinct = detail::number_texts(m_keys, m_fingerprints, attempts);
        if (m_findings.fingerprinted) {
            std::vector<std::uint32_t> ids(attempts.size());
            for (std::size_t i = 0; i < attempts.size(); ++i)
                ids[i] = attempts[i].fingerprint;
            distinct.fingerprints = detail::split_by_window(
                ids, distinct.fingerprints, [&](std::size_t i) { return attempts[i].time; },
                m_options.explain.window);
            for (std::size_t i = 0; i < attempts.size(); ++i)
                attempts[i].fingerprint = ids[i];
        }
        m_findings.intents = m_findings.fingerprinted ? distinct.fingerprints : distinct.keys;
        m_findings.identified = static_cast<std::uint64_t>(
            std::count_if(attempts.begin(), attempts.end(), [&](const Attempt& attempt) {
                return (m_findings.fingerprinted ? attempt.fingerprint : attempt.key) != 0;
            }));
    }

    // The groups of each --what-if key whose copies carry more than one
    // payload: their payloads are told apart as the groups' are. (With
    // --fingerprint their intents are fingerprints, compared as they are.)
    void add_what_if_groups(PayloadSurvey& survey) const {
        if (!m_options.fingerprint_fields.empty()) return;
        for (const auto& judge : m_what_if_keys)
            judge.for_each_mixed(
                [&](const std::vector<AlternativeKeyJudge::FirstOfIntent>& firsts) {
                    PayloadSurvey::Mixed mixed{firsts.front().seq, false, {}};
                    for (const auto& first : firsts)
                        mixed.payloads.emplace_back(first.intent, first.position);
                    survey.mixed.push_back(std::move(mixed));
                });
    }

    // Texts for the keys and intents the report shows: those of grouped records.
    void name_grouped() {
        for (const auto& group : m_findings.groups)
            for (auto index : group.records) {
                const auto& attempt = m_findings.attempts[index];
                if (attempt.key)
                    m_findings.key_texts.try_emplace(
                        attempt.key, record::encoded_values_json(m_keys.text(index),
                                                                 m_options.key_fields.size()));
                if (attempt.fingerprint)
                    m_findings.fingerprint_texts.try_emplace(
                        attempt.fingerprint,
                        record::encoded_values_json(m_fingerprints.text(index),
                                                    m_options.fingerprint_fields.size()));
            }
    }

    // Explains every group; with `survey`, adds what the groups say of
    // their payloads to it (per_delivery.hpp).
    void group(PayloadSurvey* survey) {
        auto& groups = m_findings.groups;
        auto keep = [&](Explanation group) { groups.push_back(std::move(group)); };
        bool keys_given = !m_options.key_fields.empty();
        detail::explain_groups(GroupKind::key, m_findings.attempts, keys_given, m_options.explain,
                               keep);
        detail::explain_groups(GroupKind::fingerprint, m_findings.attempts, keys_given,
                               m_options.explain, keep);
        if (survey) {
            const auto& attempts = m_findings.attempts;
            auto record_of = [&](std::size_t i) {
                return SurveyedRecord{i, attempts[i].payload, m_findings.positions[i]};
            };
            for (auto kind : {GroupKind::key, GroupKind::fingerprint}) {
                std::vector<std::vector<std::size_t>> members;
                for (const auto& group : groups)
                    if (group.kind == kind) members.push_back(group.records);
                survey_groups(members, kind == GroupKind::key || !keys_given, record_of, *survey);
            }
        }
        detail::sort_worst_first(groups);
    }

    AuditRunOptions m_options; // standard input read from its copy
    io::Diagnostics& m_diagnostics;
    std::optional<run::StdinCopy> m_stdin_copy; // outlives every read of it
    PerDelivery m_per_delivery;
    using Run = run::RecordRun<WorkerState, BlockReadings>;
    std::unique_ptr<io::Sink> m_reject_sink; // --reject, outliving the frame's reads
    std::optional<Run> m_run;                // when records are read (not only rows)
    record::PathCensus m_census;
    const std::string* m_block_texts = nullptr; // of the block being routed
    Findings m_findings;
    ReplayLedger m_replayed; // --replay-ledger
    KeptVerdicts m_verdicts; // --verdicts
    PayloadDifferences m_differences;
    detail::TextColumn m_keys, m_fingerprints;
    detail::Interner m_sources;
    std::optional<Spill> m_spill;
    std::unique_ptr<GroupShelf> m_shelf;
    std::optional<std::uint64_t> m_expected_records;    // from the inputs' size, when it tells
    std::uint64_t m_records = 0;                        // read and taken
    std::uint64_t m_identified = 0;                     // spilled records with an intent
    std::uint64_t m_rows = 0;                           // CSV and query rows read
    std::optional<Timestamp> m_first_time, m_last_time; // of every record read
    MissingCounts m_missing; // records without a value at --key, --fingerprint, ...
    std::array<std::uint8_t, k_max_layers> m_layer_most{}; // each layer's highest try
    std::vector<AlternativeKeyJudge> m_what_if_keys = [this] {
        std::vector<AlternativeKeyJudge> judges;
        for (const auto& paths : m_options.what_if.keys)
            judges.emplace_back(paths, m_options.what_if.key_ttl, m_options.what_if.examples);
        return judges;
    }();
};

} // namespace

AuditResult run_audit(const AuditRunOptions& options, io::Sink& output,
                      io::Diagnostics& diagnostics) {
    auto start = std::chrono::steady_clock::now();
    AuditRun run(options, diagnostics);
    FindingsSummary summary;
    auto& groups = run.find_groups(summary);
    summary.per_delivery = run.per_delivery().fields;
    summary.per_delivery_groups = run.per_delivery().groups_judged;
    if (!options.fingerprint_fields.empty()) summary.intent_window = options.explain.window;
    run.compare_payloads(groups);
    if (!options.what_if.ttls.empty() || options.what_if.suggest || !options.what_if.keys.empty()) {
        // One more pass over the groups (from the disk, when spilled).
        WhatIfJudge judge(options.what_if);
        for (std::size_t g = 0; g < groups.size(); ++g) {
            auto [findings, group] = groups.at(g);
            if (group.kind == GroupKind::fingerprint) {
                summary.other_keys += group.keys > 0 ? group.keys - 1 : 0;
                continue;
            }
            std::vector<Timestamp> times;
            for (auto index : group.records)
                if (auto time = findings.attempts[index].time) times.push_back(*time);
            judge.add_key_group(findings.key(findings.attempts[group.records.front()].key),
                                std::move(times));
        }
        summary.what_if =
            judge.finish(run.first_time(), run.last_time(),
                         summary.records - std::min(summary.records, summary.duplicates));
        summary.what_if->keys = run.what_if_keys();
    }
    // The input is read and grouped: every core renders. Records read but
    // none usable (a CSV, a gzip file, every key path wrong): no report,
    // which would say "no record happened more than once" of nothing.
    if (summary.records > 0 || run.rejected() == 0)
        write_report(groups, summary, options.format, output,
                     run::worker_count(options.threads) + 1, options.table_width);
    output.flush();
    AuditResult result;
    result.causes = summary.causes;
    result.groups = summary.groups;
    auto& counts = result.summary;
    counts.command = "audit";
    counts.counts = {{"in", run.lines()},
                     {"records", summary.records},
                     {"rejected", run.rejected()},
                     {"groups", summary.groups},
                     {"duplicates", summary.duplicates}};
    if (options.input.window.active())
        counts.counts.insert(counts.counts.begin() + 3, {"outside_range", run.outside_range()});
    for (auto cause : k_all_causes)
        if (summary.causes.count(cause))
            counts.counts.emplace_back(std::string(cause_name(cause)), summary.causes.at(cause));
    if (!summary.per_delivery.empty())
        counts.facts.emplace_back("per-delivery",
                                  fmt::format("{}", fmt::join(summary.per_delivery, ", ")));
    if (run.spilled())
        counts.facts.emplace_back(
            "grouped", fmt::format("on disk, past --spill-after {}", options.spill_after));
    run.census().report(diagnostics, counts);
    counts.seconds = io::seconds_since(start);
    return result;
}

} // namespace idem::audit
