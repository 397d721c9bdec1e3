// idem audit over a stream of records (docs/audit.md).

#include "idem/audit/run.hpp"

#include "idem/audit/detail/grouping.hpp"
#include "idem/audit/detail/payloads.hpp"
#include "idem/audit/spill.hpp"
#include "idem/record/annotate.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/key.hpp"
#include "idem/run/record_run.hpp"
#include "idem/run/rows.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "idem/util/encoding.hpp"
#include "idem/util/text.hpp"

#include <charconv>
#include <fmt/format.h>
#include <set>
#include <unordered_map>
#include <xxhash.h>

namespace idem::audit {

namespace {

// What a worker read from one line; the ordered stage interns it.
struct Reading {
    io::BlockLine line;
    bool parsed = true;
    std::uint64_t column = 0;
    std::string message; // why it was not parsed
    // Encoded values in BlockReadings::texts; empty: absent. No allocation
    // per record: a worker reads a block of tens of thousands.
    struct Span {
        std::uint32_t at = 0, size = 0;
    } key, fingerprint, source, endpoint, subscription;
    std::optional<Timestamp> time;
    Provider provider = Provider::unknown;
    std::uint8_t provider_attempt = 0;
    std::array<std::uint8_t, k_max_layers> layers{};
    bool route_found = false;                            // --route-field had a value
    std::array<Span, k_max_what_if_keys> what_if_keys{}; // --what-if key=PATHS
    std::uint64_t payload = 0; // 0: none (a body that is not JSON, a missing --payload field)
    std::uint16_t status = 0;  // what the receiver answered (explain.hpp), 0: unknown
    SignedCopy signed_copy;    // a capture's signature and body digests
};

struct BlockReadings {
    std::vector<Reading> outcomes;
    std::string texts;
    std::uint64_t lines = 0;

    void clear() {
        outcomes.clear();
        texts.clear();
        lines = 0;
    }
};

struct WorkerState {
    record::RecordParser parser;
    record::KeySpec payload;
    record::IgnoredPaths payload_ignored; // payload.ignore_paths, made ready once
    record::IgnoredPaths nothing_ignored; // a signed body's JSON, whole
    std::string encoded;                  // --payload values, encoded, reused from record to record
    explicit WorkerState(record::KeySpec spec)
        : payload(std::move(spec)), payload_ignored(payload.ignore_paths) {}
};

std::string_view text_of(const std::string& texts, Reading::Span span) {
    return std::string_view(texts).substr(span.at, span.size);
}

// The encoded values at `paths`, appended to `texts`; empty when one is missing.
Reading::Span encode(record::RecordParser& parser, const std::vector<record::FieldPath>& paths,
                     std::string& texts) {
    auto at = texts.size();
    for (std::size_t i = 0; i < paths.size(); ++i) {
        auto value = parser.find(paths[i]);
        if (!value) {
            texts.resize(at);
            return {};
        }
        if (i > 0) texts += ' ';
        record::append_encoded_value(texts, *value);
    }
    return {static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(texts.size() - at)};
}

// What "the same payload" compares: a 64-bit hash of the canonical record
// minus key, time, source and --ignore (no canonical text is written), or
// of the --payload values' encoding. Payloads are only ever compared
// within one run, so the hash need not be dedup's stable fingerprint.
std::uint64_t payload_hash(WorkerState& state) {
    auto& parser = state.parser;
    if (state.payload.key_paths.empty())
        return parser.event_hash(state.payload_ignored).value_or(0);
    state.encoded.clear();
    for (const auto& path : state.payload.key_paths) {
        auto value = parser.find(path);
        if (!value) return 0;
        state.encoded += ' ';
        record::append_encoded_value(state.encoded, *value);
    }
    return XXH3_64bits(state.encoded.data(), state.encoded.size());
}

// A status as a log or a capture writes it: 503, "503", or "timeout".
std::uint16_t status_of(const record::FieldValue& value) {
    if (value.type != record::FieldValue::Type::number &&
        value.type != record::FieldValue::Type::string)
        return 0;
    if (iequals(value.text, "timeout") || iequals(value.text, "dropped")) return k_no_answer;
    unsigned number = 0;
    auto [end, error] =
        std::from_chars(value.text.data(), value.text.data() + value.text.size(), number);
    if (error != std::errc() || end != value.text.data() + value.text.size() || number < 100 ||
        number > 599)
        return 0;
    return static_cast<std::uint16_t>(number);
}

std::uint16_t answered_status(record::RecordParser& parser, const AuditRunOptions& options) {
    if (options.status_field) {
        auto value = parser.find(*options.status_field);
        return value ? status_of(*value) : 0;
    }
    if (parser.shape() != record::RecordShape::envelope || !parser.has_annotations()) return 0;
    static const auto k_dropped = record::FieldPath::parse("_idem.listen.dropped");
    static const auto k_status = record::FieldPath::parse("_idem.listen.status");
    if (auto dropped = parser.find(k_dropped); dropped && dropped->text == "true")
        return k_no_answer;
    auto status = parser.find(k_status);
    return status ? status_of(*status) : 0;
}

// An attempt counter as a log writes it: 2 or "2"; 0 when it is not one.
std::uint8_t counter_of(const record::FieldValue& value) {
    if (value.type != record::FieldValue::Type::number &&
        value.type != record::FieldValue::Type::string)
        return 0;
    unsigned number = 0;
    auto [end, error] =
        std::from_chars(value.text.data(), value.text.data() + value.text.size(), number);
    if (error != std::errc() || end != value.text.data() + value.text.size()) return 0;
    return static_cast<std::uint8_t>(std::min(number, 255u));
}

// How a copy was delivered (explain.hpp DeliveryTrace): the provider and
// its retry counter from a capture's headers (or --provider), the endpoint
// it was sent to (host and path), the subscription a provider names in a
// header (or --route-field), and each retry layer's counter.
// `parts` appended to `texts`, one after another: their span.
Reading::Span append_span(std::string& texts, std::initializer_list<std::string_view> parts) {
    auto at = texts.size();
    for (auto part : parts)
        texts.append(part);
    return {static_cast<std::uint32_t>(at), static_cast<std::uint32_t>(texts.size() - at)};
}

void read_trace(record::RecordParser& parser, Reading& reading, std::string& texts,
                const record::IgnoredPaths& nothing_ignored, const AuditRunOptions& options) {
    reading.provider = options.provider;
    if (parser.shape() == record::RecordShape::envelope) {
        const auto& envelope = parser.envelope();
        auto header = [&](std::string_view name) { return envelope.header(name); };
        std::uint8_t attempt = 0;
        auto detected = provider_of_headers(header, attempt);
        if (reading.provider == Provider::unknown) reading.provider = detected;
        if (detected == reading.provider) reading.provider_attempt = attempt;
        auto host = header("X-Forwarded-Host");
        if (!host) host = header("Host");
        auto path = envelope.path.substr(0, envelope.path.find('?'));
        if (host || !path.empty())
            reading.endpoint = append_span(texts, {host.value_or(std::string_view()), path});
        // The signing: what tells a fresh attempt from a copy sent again.
        auto signing = signing_headers(header, reading.provider);
        if (signing.signature) {
            auto& copy = reading.signed_copy;
            copy.signature = XXH3_64bits(signing.signature->data(), signing.signature->size()) | 1;
            if (signing.signed_at) copy.signed_at = signed_seconds(*signing.signed_at);
            copy.body = XXH3_64bits(envelope.body.data(), envelope.body.size());
            copy.canonical = parser.event_hash(nothing_ignored).value_or(0);
        }
        // Headers that name the subscription, with few values each (never a
        // per-delivery id: those are as many as the events).
        for (std::string_view name : {"X-GitHub-Hook-ID", "X-Shopify-API-Version"})
            if (auto value = header(name); value && !value->empty()) {
                reading.subscription = append_span(texts, {name, " ", *value});
                break;
            }
    }
    if (options.route_field)
        if (auto value = parser.find(*options.route_field); value && !value->text.empty()) {
            reading.subscription =
                append_span(texts, {options.route_field->text(), " ", value->text});
            reading.route_found = true;
        }
    for (std::size_t layer = 0; layer < options.attempt_fields.size() && layer < k_max_layers;
         ++layer)
        if (auto value = parser.find(options.attempt_fields[layer]))
            reading.layers[layer] = counter_of(*value);
}

void read_line(const io::BlockLine& line, Reading& reading, std::string& texts, WorkerState& state,
               const AuditRunOptions& options) {
    auto& parser = state.parser;
    if (auto failure = parser.parse(line.bytes)) {
        reading.parsed = false;
        reading.column = failure->column;
        reading.message = std::move(failure->message);
        return;
    }
    reading.key = encode(parser, options.key_fields, texts);
    for (std::size_t k = 0; k < options.what_if_key_fields.size() && k < k_max_what_if_keys; ++k)
        reading.what_if_keys[k] = encode(parser, options.what_if_key_fields[k], texts);
    reading.fingerprint = encode(parser, options.fingerprint_fields, texts);
    if (options.source_field) {
        if (auto value = parser.find(*options.source_field)) {
            reading.source = {static_cast<std::uint32_t>(texts.size()),
                              static_cast<std::uint32_t>(value->text.size())};
            texts.append(value->text);
        }
    }
    // A record without one is counted by the --time-field check
    // (check_paths), not rejected: it still belongs to its group.
    reading.time =
        record::event_time(parser, options.time_field ? &*options.time_field : nullptr).time;
    reading.payload = payload_hash(state);
    reading.status = answered_status(parser, options);
    read_trace(parser, reading, texts, state.nothing_ignored, options);
}

void read_block(const run::InputBlock& block, WorkerState& state, const AuditRunOptions& options,
                BlockReadings& result) {
    io::LineCursor cursor(block.block.lines());
    while (auto line = cursor.next()) {
        auto& reading = result.outcomes.emplace_back();
        reading.line = *line;
        if (line->bytes.size() > options.input.max_record_bytes) {
            reading.parsed = false;
            continue;
        }
        read_line(*line, reading, result.texts, state, options);
    }
    result.lines = cursor.lines_seen();
}

class AuditRun {
public:
    AuditRun(const AuditRunOptions& options, io::Diagnostics& diagnostics)
        : m_options(options), m_diagnostics(diagnostics), m_census(options.input.allow_absent) {
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
            m_run.emplace(run::RecordRunSetup{options.input, m_reject_sink.get(),
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
        read_replay_ledger();
        read_verdicts();
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
            // free to explain partitions beside the workers.
            m_shelf = m_spill->explain_groups(std::move(context), summary,
                                              run::worker_count(m_options.threads) + 1);
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
    // them: its first record against the first record of each other payload
    // (up to three), read again from the files (docs/audit.md, "What
    // differs"). Bounded: the first k_groups_compared such groups.
    void compare_payloads(GroupShelf& groups) {
        constexpr std::size_t k_payloads_compared = 3, k_groups_compared = 10'000;
        struct Wanted {
            std::string first;
            std::vector<std::string> later;
        };
        std::vector<Wanted> wanted;
        std::set<std::string> positions;
        for (std::size_t g = 0; g < groups.size() && wanted.size() < k_groups_compared; ++g) {
            auto [findings, group] = groups.at(g);
            if (group.payloads < 2) continue;
            Wanted one{findings.position(group.records.front()), {}};
            std::set<std::uint64_t> seen{findings.attempts[group.records.front()].payload};
            for (auto index : group.records)
                if (one.later.size() < k_payloads_compared &&
                    seen.insert(findings.attempts[index].payload).second)
                    one.later.push_back(findings.position(index));
            positions.insert(one.first);
            positions.insert(one.later.begin(), one.later.end());
            wanted.push_back(std::move(one));
        }
        if (wanted.empty()) return;
        std::string unread;
        auto payloads = detail::read_payloads_again(m_options, positions, unread);
        if (!unread.empty())
            m_diagnostics.warning({}, fmt::format("groups mix payloads, but {}", unread));
        for (const auto& one : wanted) {
            auto first = payloads.find(one.first);
            if (first == payloads.end()) continue;
            auto& comparisons = m_differences.by_first[one.first];
            for (const auto& at : one.later) {
                auto later = payloads.find(at);
                if (later == payloads.end()) continue;
                PayloadComparison comparison{one.first, at,
                                             differences(first->second, later->second), 0};
                if (comparison.fields.size() > k_differences_shown) {
                    comparison.more = comparison.fields.size() - k_differences_shown;
                    comparison.fields.resize(k_differences_shown);
                }
                comparisons.push_back(std::move(comparison));
            }
        }
    }

    [[nodiscard]] std::uint64_t rejected() const { return m_run ? m_run->rejects().count() : 0; }
    [[nodiscard]] const record::PathCensus& census() const { return m_census; }
    [[nodiscard]] bool spilled() const { return m_spill.has_value(); }
    [[nodiscard]] std::optional<Timestamp> first_time() const { return m_first_time; }

    // --what-if key=PATHS, judged; keys shown as the report shows keys.
    [[nodiscard]] std::vector<WhatIf::KeySetting> what_if_keys() const {
        std::vector<WhatIf::KeySetting> settings;
        for (std::size_t k = 0; k < m_what_if_keys.size(); ++k) {
            auto setting = m_what_if_keys[k].finish();
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
        group();
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
        steps.prepare = [&](const run::InputBlock&, BlockReadings& result) {
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
        if (!m_options.store_uri.empty()) read_store(take_row);
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

    // What replay kept per key, by the key as reports show it: a one-field
    // key's JSON string (a key group of several fields is never replay's).
    void read_replay_ledger() {
        if (m_options.replay_ledger_uri.empty()) return;
        auto store = open_kept_store(m_options.replay_ledger_uri, "--replay-ledger", "replay");
        store->replay_ledger().for_each_replay_entry(
            m_options.replay_scope, [&](const store::ReplayEntry& entry) {
                std::string label;
                record::append_json_string(label, entry.key);
                m_replayed.insert_or_assign(std::move(label), entry);
            });
        if (m_replayed.empty())
            m_diagnostics.warning({m_options.replay_ledger_uri, 0, 0, 0},
                                  fmt::format("the replay ledger has no key under scope {}: "
                                              "replay's scope is 'replay:' and its --to URL",
                                              quote(m_options.replay_scope)));
    }

    // What verify kept, by "file:line" as the report names records.
    void read_verdicts() {
        if (m_options.verdicts_uri.empty()) return;
        auto store =
            open_kept_store(m_options.verdicts_uri, "--verdicts", "verify --keep-verdicts");
        store->verdicts().for_each_verdict(
            store::k_verdict_scope, [&](const store::VerdictRecord& kept) {
                m_verdicts.insert_or_assign(fmt::format("{}:{}", kept.source, kept.line),
                                            KeptVerdict{kept.valid, kept.reason});
            });
        if (m_verdicts.empty())
            m_diagnostics.warning({m_options.verdicts_uri, 0, 0, 0},
                                  "the store holds no verdict: run idem verify with "
                                  "--keep-verdicts and this --store");
    }

    // A store another command wrote to: never :memory:, which keeps nothing.
    static std::unique_ptr<store::Store>
    open_kept_store(const std::string& uri, std::string_view flag, std::string_view writer) {
        auto location = store::parse_store_uri(uri);
        if (location.kind == store::StoreKind::memory)
            throw UsageError(fmt::format("{} :memory: keeps nothing between runs: give the SQLite "
                                         "file or redis:// URI that {} used",
                                         flag, writer));
        return store::open_store(location);
    }

    // Every copy dedup recorded, first copies and repeats, as records.
    void read_store(const run::RowHandler& take_row) {
        auto store = open_kept_store(m_options.store_uri, "--store", "dedup");
        std::string json;
        std::uint64_t not_kept = 0, events_not_kept = 0;
        store->evidence().for_each_fingerprint_record(
            m_options.store_scope, [&](const store::FingerprintRecord& record) {
                if (record.copies_not_kept) {
                    not_kept += record.copies_not_kept;
                    ++events_not_kept;
                }
                json.assign(R"({"fingerprint":")");
                json += hex_encode(
                    std::string_view(reinterpret_cast<const char*>(record.fingerprint.data()),
                                     record.fingerprint.size()));
                json += R"(","time":")";
                json += format_rfc3339(record.event_time);
                json += R"(","source":)";
                record::append_json_string(json, record.source);
                json += '}';
                take_row(json, {record.source, false, record.line});
            });
        if (not_kept)
            m_diagnostics.warning(
                {m_options.store_uri, 0, 0, 0},
                fmt::format("{} more copies of {} events were counted by dedup but not kept as "
                            "evidence (the store keeps the first repeats of an event and its "
                            "latest copy): those groups are larger than shown",
                            not_kept, events_not_kept));
    }

    void take(const Reading& reading, const std::string& texts, Findings::Position position) {
        count_missing(reading);
        for (std::size_t k = 0; k < m_what_if_keys.size(); ++k)
            m_what_if_keys[k].add(text_of(texts, reading.what_if_keys[k]), reading.time,
                                  reading.payload);
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
        m_spill.emplace(layout, directory);
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
        m_findings.intents = m_findings.fingerprinted ? distinct.fingerprints : distinct.keys;
        m_findings.identified = static_cast<std::uint64_t>(
            std::count_if(attempts.begin(), attempts.end(), [&](const Attempt& attempt) {
                return (m_findings.fingerprinted ? attempt.fingerprint : attempt.key) != 0;
            }));
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

    void group() {
        auto& groups = m_findings.groups;
        auto keep = [&](Explanation group) { groups.push_back(std::move(group)); };
        bool keys_given = !m_options.key_fields.empty();
        detail::explain_groups(GroupKind::key, m_findings.attempts, keys_given, m_options.explain,
                               keep);
        detail::explain_groups(GroupKind::fingerprint, m_findings.attempts, keys_given,
                               m_options.explain, keep);
        detail::sort_worst_first(groups);
    }

    const AuditRunOptions& m_options;
    io::Diagnostics& m_diagnostics;
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
    std::uint64_t m_records = 0;                        // read and taken
    std::uint64_t m_identified = 0;                     // spilled records with an intent
    std::uint64_t m_rows = 0;                           // CSV and query rows read
    std::optional<Timestamp> m_first_time, m_last_time; // of every record read
    MissingCounts m_missing; // records without a value at --key, --fingerprint, ...
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
    for (auto cause : k_all_causes)
        if (summary.causes.count(cause))
            counts.counts.emplace_back(std::string(cause_name(cause)), summary.causes.at(cause));
    if (run.spilled())
        counts.facts.emplace_back(
            "grouped", fmt::format("on disk, past --spill-after {}", options.spill_after));
    run.census().report(diagnostics, counts);
    counts.seconds = io::seconds_since(start);
    return result;
}

} // namespace idem::audit
