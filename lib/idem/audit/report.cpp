// The three text reports of `idem audit`. JSON is built with nlohmann (it is
// a document, not a per-record path); the table and Markdown with fmt.

#include "idem/audit/report.hpp"

#include "idem/audit/detail/wording.hpp"
#include "idem/record/annotate.hpp"

#include "idem/util/ordered_workers.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

namespace idem::audit {

std::string Findings::position(std::size_t attempt) const {
    std::string out;
    append_position(out, attempt);
    return out;
}

// By hand, not fmt: reports write one per record.
void Findings::append_position(std::string& out, std::size_t attempt) const {
    const auto& at = positions[attempt];
    out += inputs[at.input];
    out += at.row ? ":row " : ":";
    append_decimal(out, at.number);
}

std::string Findings::payload_hex(const Attempt& attempt) {
    std::string out;
    append_payload_hex(out, attempt);
    return out;
}

void Findings::append_payload_hex(std::string& out, const Attempt& attempt) {
    static constexpr char k_hex[] = "0123456789abcdef";
    auto bits = attempt.payload >> 16; // 48 bits, 12 digits
    char text[12];
    for (int i = 11; i >= 0; --i, bits >>= 4)
        text[i] = k_hex[bits & 0xf];
    out.append(text, sizeof text);
}

namespace {
const std::string k_none;
const std::string& text_of(const std::unordered_map<std::uint32_t, std::string>& texts,
                           std::uint32_t id) {
    auto found = texts.find(id);
    return found == texts.end() ? k_none : found->second;
}
} // namespace

const std::string& Findings::key(std::uint32_t id) const {
    return text_of(key_texts, id);
}

const std::string& Findings::fingerprint(std::uint32_t id) const {
    return text_of(fingerprint_texts, id);
}

const KeptVerdict* Findings::verdict_of(std::size_t attempt) const {
    if (!verdicts || verdicts->empty()) return nullptr;
    return verdict_at(position(attempt));
}

const std::vector<PayloadComparison>* Findings::differences_of(const Explanation& group) const {
    if (!differences || group.payloads < 2) return nullptr;
    return differences->of(position(group.records.front()));
}

SignatureVerdict signature_verdict(const KeptVerdicts& verdicts,
                                   const std::vector<std::string>& inputs,
                                   const Findings::Position& position) {
    if (verdicts.empty()) return SignatureVerdict::unknown;
    std::string at = inputs[position.input];
    at += position.row ? ":row " : ":";
    at += std::to_string(position.number);
    auto found = verdicts.find(at);
    return found == verdicts.end() ? SignatureVerdict::unknown
                                   : classify_verdict(found->second.valid, found->second.reason);
}

const KeptVerdict* Findings::verdict_at(const std::string& position) const {
    if (!verdicts) return nullptr;
    auto found = verdicts->find(position);
    return found == verdicts->end() ? nullptr : &found->second;
}

const store::ReplayEntry* Findings::replay_of(const Explanation& group) const {
    if (!replayed || group.kind != GroupKind::key) return nullptr;
    auto found = replayed->find(key(attempts[group.records.front()].key));
    return found == replayed->end() ? nullptr : &found->second;
}

FindingsSummary summarize(const Findings& findings) {
    FindingsSummary summary;
    summary.records = findings.records;
    summary.groups = findings.groups.size();
    // One intent per fingerprint (with --fingerprint), else per key.
    summary.duplicates = findings.identified - findings.intents;
    summary.duplicate_ratio = summary.records == 0 ? 0
                                                   : static_cast<double>(summary.duplicates) /
                                                         static_cast<double>(summary.records);
    std::unordered_map<std::uint32_t, std::uint64_t> by_source;
    std::vector<bool> counted(findings.attempts.size(), false);
    for (std::size_t g = 0; g < findings.groups.size(); ++g) {
        const auto& group = findings.groups[g];
        if (group.records.size() > findings.groups[summary.worst].records.size()) summary.worst = g;
        for (const auto& evidence : group.causes)
            ++summary.causes[evidence.cause];
        for (auto record : group.records)
            if (!counted[record]) {
                counted[record] = true;
                ++by_source[findings.attempts[record].source];
            }
    }
    for (const auto& [source, count] : by_source)
        summary.sources.emplace_back(
            findings.sources[source].empty() ? "(none)" : findings.sources[source], count);
    std::sort(summary.sources.begin(), summary.sources.end(), [](const auto& a, const auto& b) {
        return a.second != b.second ? a.second > b.second : a.first < b.first;
    });
    return summary;
}

namespace {

using namespace detail;

// The report's text, handed to the sink a megabyte at a time when there is
// one: a report of a million groups is never one string.
class ReportOut {
public:
    // `json`: the report is JSON, and every piece passes json_report_text
    // on its way out (pieces end between values, never inside a character).
    ReportOut(io::Sink* sink, bool json) : m_sink(sink), m_json(json) {}
    std::string& text() { return m_text; }
    void flush_when_large() {
        if (m_sink && m_text.size() >= k_chunk_bytes) {
            write(m_text);
            m_text.clear();
        }
    }
    // A piece rendered elsewhere, after the text so far.
    void append(const std::string& piece) {
        if (!m_sink) {
            m_text += piece;
            return;
        }
        if (!m_text.empty()) {
            write(m_text);
            m_text.clear();
        }
        write(piece);
    }
    // The rest of the text: written to the sink, or returned without one.
    std::string finish() {
        if (!m_sink) return m_json ? json_report_text(m_text) : std::move(m_text);
        write(m_text);
        m_text.clear();
        return {};
    }

private:
    void write(const std::string& text) {
        if (m_json)
            m_sink->write(json_report_text(text));
        else
            m_sink->write(text);
    }
    static constexpr std::size_t k_chunk_bytes = 1 << 20;
    io::Sink* m_sink;
    bool m_json;
    std::string m_text;
};

// Appends group `g`'s text to `out`.
using RenderGroup = std::function<void(const Findings& findings, const Explanation& group,
                                       std::size_t g, std::string& out)>;

// Every group rendered in order. On several threads past a few hundred
// groups, a run of them per job, each thread reading the groups through
// its own reader: a report of tens of thousands of groups took longer
// alone than grouping a million records on every core.
void render_groups(GroupShelf& groups, ReportOut& report, std::size_t threads,
                   const RenderGroup& render) {
    constexpr std::size_t k_groups_per_job = 256;
    auto end = groups.size();
    if (threads <= 1 || end <= k_groups_per_job) {
        for (std::size_t g = 0; g < end; ++g) {
            auto [findings, group] = groups.at(g);
            render(findings, group, g, report.text());
            report.flush_when_large();
        }
        return;
    }
    std::vector<std::unique_ptr<GroupShelf>> readers;
    for (std::size_t i = 0; i < threads; ++i)
        readers.push_back(groups.reader());
    struct Job {
        std::size_t first, end;
    };
    OrderedWorkers<Job, std::string> pool(threads, 4 * threads, [&](Job& job, std::size_t worker) {
        std::string text;
        for (auto g = job.first; g < job.end; ++g) {
            auto [findings, group] = readers[worker]->at(g);
            render(findings, group, g, text);
        }
        return text;
    });
    for (std::size_t g = 0; g < end; g += k_groups_per_job) {
        while (pool.full())
            if (auto done = pool.next(true)) report.append(done->output);
        pool.submit({g, std::min(end, g + k_groups_per_job)});
    }
    while (auto done = pool.next(true))
        report.append(done->output);
}

// One line of the table report: its values escaped (terminal_text: no
// control byte, C1 or bidi character from a log reaches the terminal, and
// no value breaks the line), then cut to the reader's width (fit_line).
struct TableLine {
    std::size_t width = k_never_cut;
    std::string operator()(std::string_view raw) const {
        return fit_line(terminal_text(raw), width);
    }
};

void render_what_if(const FindingsSummary& summary, std::string& out, bool markdown,
                    const TableLine& fit = {});

void render_table(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                  std::size_t threads, std::size_t width) {
    TableLine fit{width};
    auto& out = report.text();
    out += fit(fmt::format("idem audit: {} record{}, {} group{}, {} duplicate{} ({:.1f}%)",
                           summary.records, summary.records == 1 ? "" : "s", summary.groups,
                           summary.groups == 1 ? "" : "s", summary.duplicates,
                           summary.duplicates == 1 ? "" : "s", summary.duplicate_ratio * 100)) +
           "\n";
    if (summary.groups == 0) {
        out += "no record happened more than once\n";
        render_what_if(summary, out, false, fit); // another key may have repeats
        return;
    }
    {
        auto worst = groups.at(summary.worst);
        out += fit(fmt::format("worst: {} records for {}", worst.group.records.size(),
                               group_label(worst.findings, worst.group))) +
               "\n";
    }
    std::vector<std::string> causes, sources;
    for (const auto& [cause, count] : summary.causes)
        causes.push_back(fmt::format("{} {}", cause_name(cause), count));
    for (const auto& [source, count] : summary.sources)
        sources.push_back(fmt::format("{} {}", source, count));
    out += fit("causes: " + fmt::format("{}", fmt::join(causes, ", "))) + "\n";
    out += fit("sources: " + fmt::format("{}", fmt::join(sources, ", "))) + "\n";
    render_what_if(summary, out, false, fit);
    render_groups(
        groups, report, threads,
        [fit](const Findings& findings, const Explanation& group, std::size_t g,
              std::string& text) {
            text += '\n';
            text += fit(fmt::format("#{} {} records {} from {} source{}, {}", g + 1,
                                    group.records.size(),
                                    group.first ? "over " + span_of(group) : "without a time",
                                    group.sources.size(), group.sources.size() == 1 ? "" : "s",
                                    group_label(findings, group))) +
                    "\n";
            if (group.first)
                text += fit(fmt::format("   first {}  last {}", format_rfc3339(*group.first),
                                        format_rfc3339(*group.last))) +
                        "\n";
            for (const auto& evidence : group.causes)
                text += fit(fmt::format("   {:<16} {}", cause_name(evidence.cause),
                                        describe(findings, group, evidence))) +
                        "\n";
            if (const auto* entry = findings.replay_of(group))
                text += fit(fmt::format("   {:<16} {}", "replay ledger", describe_replay(*entry))) +
                        "\n";
            if (auto verdicts = describe_verdicts(findings, group))
                text += fit(fmt::format("   {:<16} {}", "verify", *verdicts)) + "\n";
            for (const auto& line : describe_differences(findings, group))
                text += fit(fmt::format("   {:<16} {}", "differs", line)) + "\n";
        });
}

// JSON by hand for the groups: keys and intents are already JSON text, and a
// report of a million records should not build a DOM of them first.
void append_json_text(std::string& out, const std::string& json) {
    out += json.empty() ? "null" : json;
}

void append_time(std::string& out, const std::optional<Timestamp>& at) {
    if (!at) {
        out += "null";
        return;
    }
    out += '"'; // nothing in a timestamp needs escaping
    append_rfc3339(out, *at);
    out += '"';
}

void append_seconds(std::string& out, const std::vector<Duration>& gaps) {
    out += '[';
    for (std::size_t i = 0; i < gaps.size(); ++i)
        fmt::format_to(std::back_inserter(out), "{}{}", i ? "," : "", seconds(gaps[i]));
    out += ']';
}

// "replay":{...}: what the ledger kept for the group's key.
void append_replay(std::string& out, const store::ReplayEntry& entry) {
    out += R"(,"replay":{"state":)";
    record::append_json_string(out, store::replay_state_name(entry.state));
    fmt::format_to(std::back_inserter(out), R"(,"attempts":{},"status":{},"latency_ms":{})",
                   entry.attempts, entry.status, entry.latency_ms);
    out += R"(,"error":)";
    record::append_json_string(out, entry.error);
    out += R"(,"updated_at":)";
    append_time(out, entry.updated_at);
    out += '}';
}

// "differences":[{"at","against","fields":[{"path","before","after"}],
// "more"}]: only for a group that mixes payloads whose records were read
// again. Values are the JSON values; null where the field is absent (a
// field holding null reads "null" in the text formats, "(absent)" there).
void append_differences(std::string& out, const Findings& findings, const Explanation& group) {
    const auto* comparisons = findings.differences_of(group);
    if (!comparisons) return;
    out += R"(,"differences":[)";
    for (std::size_t c = 0; c < comparisons->size(); ++c) {
        const auto& comparison = (*comparisons)[c];
        out += c ? R"(,{"at":)" : R"({"at":)";
        record::append_json_string(out, json_report_text(comparison.later_at));
        out += R"(,"against":)";
        record::append_json_string(out, json_report_text(comparison.first_at));
        out += R"(,"fields":[)";
        for (std::size_t f = 0; f < comparison.fields.size(); ++f) {
            const auto& field = comparison.fields[f];
            out += f ? R"(,{"path":)" : R"({"path":)";
            record::append_json_string(out, json_report_text(field.path));
            for (auto [name, value] : {std::pair{R"(,"before":)", &field.before},
                                       std::pair{R"(,"after":)", &field.after}}) {
                out += name;
                // The value itself, every non-ASCII character escaped: no
                // control or bidi character reaches a reader raw.
                out += *value ? nlohmann::json::parse(**value, nullptr, false)
                                    .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
                              : std::string("null");
            }
            out += '}';
        }
        fmt::format_to(std::back_inserter(out), R"(],"more":{}}})", comparison.more);
    }
    out += ']';
}

// "verdicts":{"valid":N,"invalid":M,"unchecked":K}: only when verify kept
// a verdict for one of the group's records.
void append_verdict_counts(std::string& out, const Findings& findings, const Explanation& group) {
    if (!findings.verdicts) return;
    std::size_t valid = 0, invalid = 0;
    for (auto index : group.records)
        if (const auto* verdict = findings.verdict_of(index)) ++(verdict->valid ? valid : invalid);
    if (valid + invalid == 0) return;
    fmt::format_to(std::back_inserter(out),
                   R"(,"verdicts":{{"valid":{},"invalid":{},"unchecked":{}}})", valid, invalid,
                   group.records.size() - valid - invalid);
}

void append_group(std::string& out, const Findings& findings, const Explanation& group) {
    const auto& first = findings.attempts[group.records.front()];
    auto key = group.kind == GroupKind::key ? findings.key(first.key) : std::string();
    out += group.kind == GroupKind::key ? R"({"kind":"key","key":)"
                                        : R"({"kind":"fingerprint","key":)";
    append_json_text(out, key);
    out += R"(,"fingerprint":)";
    append_json_text(out, findings.fingerprint(first.fingerprint));
    out += R"(,"count":)";
    append_decimal(out, group.records.size());
    out += R"(,"first":)";
    append_time(out, group.first);
    out += R"(,"last":)";
    append_time(out, group.last);
    out += R"(,"span_seconds":)";
    if (group.first && group.last)
        fmt::format_to(std::back_inserter(out), "{}", seconds(*group.last - *group.first));
    else
        out += "null";
    out += R"(,"sources":[)";
    for (std::size_t i = 0; i < group.sources.size(); ++i) {
        if (i) out += ',';
        record::append_json_string(out, findings.sources[group.sources[i]]);
    }
    out += R"(],"gaps_seconds":)";
    append_seconds(out, group.gaps);
    out += R"(,"payloads":)";
    append_decimal(out, group.payloads);
    out += R"(,"keys":)";
    append_decimal(out, group.keys);
    out += R"(,"causes":[)";
    for (std::size_t i = 0; i < group.causes.size(); ++i) {
        out += i ? ",\"" : "\"";
        out += cause_name(group.causes[i].cause);
        out += '"';
    }
    out += R"(],"evidence":{)";
    for (std::size_t i = 0; i < group.causes.size(); ++i) {
        const auto& evidence = group.causes[i];
        out += i ? ",\"" : "\"";
        out += cause_name(evidence.cause);
        out += R"(":{"records":[)";
        for (std::size_t r = 0; r < evidence.records.size(); ++r) {
            if (r) out += ',';
            append_decimal(out, evidence.records[r]);
        }
        out += R"(],"gaps_seconds":)";
        append_seconds(out, evidence.gaps);
        if (evidence.cause == Cause::retry_storm) {
            out += R"(,"source":)";
            record::append_json_string(out, findings.sources[evidence.source]);
        }
        if (evidence.cause == Cause::provider_retry) {
            const auto& copy = findings.attempts[group.records[evidence.records.front()]];
            fmt::format_to(std::back_inserter(out), R"(,"provider":"{}","attempts":[{}])",
                           provider_name(copy.trace.provider),
                           fmt::join(evidence.attempt_numbers, ","));
        }
        if (evidence.cause == Cause::fan_out) {
            out += R"(,"differs":)";
            record::append_json_string(out, evidence.detail);
        }
        out += R"(,"summary":)";
        record::append_json_string(out, describe(findings, group, evidence));
        out += '}';
    }
    out += '}';
    if (const auto* entry = findings.replay_of(group)) append_replay(out, *entry);
    append_verdict_counts(out, findings, group);
    append_differences(out, findings, group);
    out += R"(,"records":[)";
    std::string position;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        auto index = group.records[i];
        const auto& attempt = findings.attempts[index];
        out += i ? R"(,{"at":)" : R"({"at":)";
        position.clear();
        findings.append_position(position, index);
        record::append_json_string(out, position);
        out += R"(,"time":)";
        append_time(out, attempt.time);
        out += R"(,"source":)";
        record::append_json_string(out, findings.sources[attempt.source]);
        out += R"(,"key":)";
        append_json_text(out, findings.key(attempt.key));
        out += R"(,"payload":")";
        Findings::append_payload_hex(out, attempt);
        out += '"';
        // What the receiver answered it, when the evidence says.
        if (attempt.status == k_no_answer)
            out += R"(,"answered":"none")";
        else if (attempt.status != 0) {
            out += R"(,"answered":)";
            append_decimal(out, attempt.status);
        }
        if (const auto* verdict = findings.verdict_at(position)) {
            out += verdict->valid ? R"(,"verdict":{"valid":true,"reason":)"
                                  : R"(,"verdict":{"valid":false,"reason":)";
            record::append_json_string(out, verdict->reason);
            out += '}';
        }
        out += '}';
    }
    out += "]}";
}

// The summary is small: nlohmann, indented. The groups follow one per line.
// --what-if and --suggest, as text (a table or Markdown).
void render_what_if(const FindingsSummary& summary, std::string& out, bool markdown,
                    const TableLine& fit) {
    if (!summary.what_if) return;
    const auto& what_if = *summary.what_if;
    auto mib = [](std::uint64_t held, std::uint64_t per) {
        auto bytes = static_cast<double>(held * per);
        if (bytes < 1024) return fmt::format("{:.0f} B", bytes);
        if (bytes < 1024.0 * 1024) return fmt::format("{:.1f} KiB", bytes / 1024);
        if (bytes < 1024.0 * 1024 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024 * 1024));
        return fmt::format("{:.1f} GiB", bytes / (1024.0 * 1024 * 1024));
    };
    // A duplicate a setting let through: a row of the table, or an indented line.
    auto missed_line = [&](const WhatIf::Missed& missed, std::string_view indent) {
        out += markdown
                   ? fmt::format("| | missed: {} came {} after its claim | | | | | |\n",
                                 markdown_text(missed.key), format_duration(missed.after_claim))
                   : fit(fmt::format("{}missed {}: came {} after its claim", indent, missed.key,
                                     format_duration(missed.after_claim))) +
                         "\n";
    };
    if (!what_if.settings.empty())
        out += markdown
                   ? "\n### What if the dedup key had lived longer?\n\n"
                     "| TTL | duplicates | caught | missed | fingerprints held | SQLite | Redis |\n"
                     "|---|---|---|---|---|---|---|\n"
                   : "\nwhat if the dedup key had lived...\n";
    for (const auto& setting : what_if.settings) {
        auto ttl = format_duration(setting.ttl);
        out +=
            markdown
                ? fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", ttl, setting.duplicates,
                              setting.caught, setting.missed, setting.held,
                              mib(setting.held, k_bytes_per_fingerprint_sqlite),
                              mib(setting.held, k_bytes_per_fingerprint_redis))
                : fit(fmt::format("  {:>6}: caught {} of {}, missed {}; ~{} held (SQLite {}, "
                                  "Redis {})",
                                  ttl, setting.caught, setting.duplicates, setting.missed,
                                  setting.held, mib(setting.held, k_bytes_per_fingerprint_sqlite),
                                  mib(setting.held, k_bytes_per_fingerprint_redis))) +
                      "\n";
        for (const auto& missed : setting.examples)
            missed_line(missed, "          ");
    }
    if (!what_if.keys.empty())
        out += markdown ? "\n### What if another key had been the idempotency key?\n\n"
                          "| key | records | duplicates | caught | missed | groups mixing "
                          "payloads | copies swallowed |\n|---|---|---|---|---|---|---|\n"
                        : "\nwhat if the idempotency key had been...\n";
    for (const auto& key : what_if.keys) {
        auto ttl = format_duration(key.ttl);
        out +=
            markdown
                ? fmt::format("| {} (TTL {}) | {} | {} | {} | {} | {} | {} |\n",
                              markdown_text(key.key), ttl, key.records, key.duplicates, key.caught,
                              key.missed, key.conflicting_groups, key.swallowed)
                : fit(fmt::format("  {}: caught {} of {} (TTL {}), missed {}; {} group{} "
                                  "mixing payloads",
                                  key.key, key.caught, key.duplicates, ttl, key.missed,
                                  key.conflicting_groups, key.conflicting_groups == 1 ? "" : "s")) +
                      "\n";
        for (const auto& conflict : key.conflict_examples)
            out += markdown
                       ? fmt::format("| | would swallow another intent under {} | | | | | |\n",
                                     markdown_text(conflict))
                       : fit(fmt::format("      would swallow another intent under {}", conflict)) +
                             "\n";
        for (const auto& missed : key.examples)
            missed_line(missed, "      ");
    }
    if (summary.other_keys > 0)
        out += fmt::format("{}{} duplicate{} came under a new key (key-regenerated): no TTL on the "
                           "key catches {}; dedup on the business fingerprint would\n",
                           markdown ? "\n" : "  ", summary.other_keys,
                           summary.other_keys == 1 ? "" : "s",
                           summary.other_keys == 1 ? "it" : "them");
    if (!what_if.suggestions.empty()) {
        out += markdown ? "\n### Suggested TTL\n\n| covers | TTL | fingerprints held | SQLite "
                          "| Redis |\n|---|---|---|---|---|\n"
                        : "the TTL that would have caught, of the duplicates,\n";
        for (const auto& suggestion : what_if.suggestions) {
            auto covers = fmt::format("{:g}%", suggestion.coverage * 100);
            out += markdown ? fmt::format("| {} | {} | {} | {} | {} |\n", covers,
                                          format_duration(suggestion.ttl), suggestion.held,
                                          mib(suggestion.held, k_bytes_per_fingerprint_sqlite),
                                          mib(suggestion.held, k_bytes_per_fingerprint_redis))
                            : fmt::format("  {:>6}: --ttl {} (~{} held, SQLite {}, Redis {})\n",
                                          covers, format_duration(suggestion.ttl), suggestion.held,
                                          mib(suggestion.held, k_bytes_per_fingerprint_sqlite),
                                          mib(suggestion.held, k_bytes_per_fingerprint_redis));
        }
        std::string histogram;
        for (std::size_t b = 0; b < what_if.delays.size(); ++b)
            if (what_if.delays[b] > 0)
                histogram += fmt::format("{}{} {}", histogram.empty() ? "" : ", ",
                                         k_delay_buckets[b], what_if.delays[b]);
        out += fmt::format("{}delays of duplicates after their key's first copy: {}\n",
                           markdown ? "\n" : "  ", histogram);
    }
}

nlohmann::json what_if_json(const FindingsSummary& summary) {
    const auto& what_if = *summary.what_if;
    // Keys are JSON text in the report's tables; here, the value.
    auto key_value = [](const std::string& text) {
        auto value = nlohmann::json::parse(text, nullptr, false);
        return value.is_discarded() ? nlohmann::json(text) : value;
    };
    auto missed_examples = [&](const std::vector<WhatIf::Missed>& examples) {
        auto missed = nlohmann::json::array();
        for (const auto& example : examples)
            missed.push_back({{"key", key_value(example.key)},
                              {"after_claim_seconds",
                               std::chrono::duration<double>(example.after_claim).count()}});
        return missed;
    };
    nlohmann::json json;
    auto& settings = json["settings"] = nlohmann::json::array();
    for (const auto& setting : what_if.settings) {
        nlohmann::json item{{"ttl", format_duration(setting.ttl)},
                            {"ttl_seconds", std::chrono::duration<double>(setting.ttl).count()},
                            {"duplicates", setting.duplicates},
                            {"caught", setting.caught},
                            {"missed", setting.missed},
                            {"fingerprints_held", setting.held},
                            {"bytes_sqlite", setting.held * k_bytes_per_fingerprint_sqlite},
                            {"bytes_redis", setting.held * k_bytes_per_fingerprint_redis}};
        item["missed_examples"] = missed_examples(setting.examples);
        settings.push_back(std::move(item));
    }
    auto& keys = json["keys"] = nlohmann::json::array();
    for (const auto& key : what_if.keys) {
        nlohmann::json item{{"key", key.key},
                            {"ttl", format_duration(key.ttl)},
                            {"records", key.records},
                            {"duplicates", key.duplicates},
                            {"caught", key.caught},
                            {"missed", key.missed},
                            {"groups_mixing_payloads", key.conflicting_groups},
                            {"copies_swallowed", key.swallowed}};
        auto& conflicts = item["mixing_examples"] = nlohmann::json::array();
        for (const auto& conflict : key.conflict_examples)
            conflicts.push_back(key_value(conflict));
        item["missed_examples"] = missed_examples(key.examples);
        keys.push_back(std::move(item));
    }
    json["other_keys"] = summary.other_keys;
    auto& suggestions = json["suggestions"] = nlohmann::json::array();
    for (const auto& suggestion : what_if.suggestions)
        suggestions.push_back(
            {{"coverage", suggestion.coverage},
             {"ttl", format_duration(suggestion.ttl)},
             {"ttl_seconds", std::chrono::duration<double>(suggestion.ttl).count()},
             {"fingerprints_held", suggestion.held},
             {"bytes_sqlite", suggestion.held * k_bytes_per_fingerprint_sqlite},
             {"bytes_redis", suggestion.held * k_bytes_per_fingerprint_redis}});
    auto& delays = json["delays"] = nlohmann::json::object();
    for (std::size_t b = 0; b < what_if.delays.size(); ++b)
        delays[k_delay_buckets[b]] = what_if.delays[b];
    json["timed_duplicates"] = what_if.timed_duplicates;
    return json;
}

void render_json(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                 std::size_t threads) {
    nlohmann::json json;
    json["records"] = summary.records;
    json["groups"] = summary.groups;
    json["duplicates"] = summary.duplicates;
    json["duplicate_ratio"] = summary.duplicate_ratio;
    json["worst_amplification"] =
        summary.groups == 0 ? nlohmann::json(nullptr)
                            : nlohmann::json(groups.at(summary.worst).group.records.size());
    auto& causes = json["causes"] = nlohmann::json::object();
    for (const auto& [cause, count] : summary.causes)
        causes[std::string(cause_name(cause))] = count;
    auto& sources = json["sources"] = nlohmann::json::object();
    for (const auto& [source, count] : summary.sources)
        sources[source] = count;
    if (summary.what_if) json["what_if"] = what_if_json(summary);
    auto& out = report.text();
    out += "{\"summary\": ";
    out += json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
    out += ",\n\"groups\": [";
    render_groups(
        groups, report, threads,
        [](const Findings& findings, const Explanation& group, std::size_t g, std::string& text) {
            text += g ? ",\n  " : "\n  ";
            append_group(text, findings, group);
        });
    report.text() += groups.size() == 0 ? "]}\n" : "\n]}\n";
}

// Markdown tables break on '|' and newlines in values.
void render_markdown(GroupShelf& groups, const FindingsSummary& summary, ReportOut& report,
                     std::size_t threads) {
    auto& out = report.text();
    out += "## idem audit\n\n";
    out += fmt::format("- **{}** records, **{}** groups, **{}** duplicates ({:.1f}%)\n",
                       summary.records, summary.groups, summary.duplicates,
                       summary.duplicate_ratio * 100);
    if (summary.groups == 0) {
        out += "- no record happened more than once\n";
        render_what_if(summary, out, true); // another key may have repeats
        return;
    }
    {
        auto worst = groups.at(summary.worst);
        out += fmt::format("- worst amplification: **{}** records for {}\n",
                           worst.group.records.size(),
                           markdown_text(group_label(worst.findings, worst.group)));
    }
    for (const auto& [cause, count] : summary.causes)
        out += fmt::format("- `{}`: {} group{}\n", cause_name(cause), count, count == 1 ? "" : "s");
    render_what_if(summary, out, true);
    out += "\n| # | records | span | sources | causes | group |\n|---|---|---|---|---|---|\n";
    render_groups(
        groups, report, threads,
        [](const Findings& findings, const Explanation& group, std::size_t g, std::string& text) {
            std::vector<std::string> sources;
            for (auto source : group.sources)
                sources.push_back(findings.sources[source]);
            text += fmt::format("| {} | {} | {} | {} | {} | {} |\n", g + 1, group.records.size(),
                                span_of(group),
                                markdown_text(fmt::format("{}", fmt::join(sources, ", "))),
                                cause_list(group), markdown_text(group_label(findings, group)));
        });
    render_groups(
        groups, report, threads,
        [](const Findings& findings, const Explanation& group, std::size_t g, std::string& text) {
            text +=
                fmt::format("\n### #{} {}\n\n", g + 1, markdown_text(group_label(findings, group)));
            for (const auto& evidence : group.causes)
                text += fmt::format("- **{}**: {}\n", cause_name(evidence.cause),
                                    markdown_text(describe(findings, group, evidence)));
            if (const auto* entry = findings.replay_of(group))
                text += fmt::format("- **replay ledger**: {}\n",
                                    markdown_text(describe_replay(*entry)));
            if (auto verdicts = describe_verdicts(findings, group))
                text += fmt::format("- **verify**: {}\n", markdown_text(*verdicts));
            for (const auto& line : describe_differences(findings, group))
                text += fmt::format("- **differs**: {}\n", markdown_text(line));
            text += "\n| at | time | source | key | payload |\n|---|---|---|---|---|\n";
            for (auto index : group.records) {
                const auto& attempt = findings.attempts[index];
                text += fmt::format("| {} | {} | {} | {} | `{}` |\n",
                                    markdown_text(findings.position(index)),
                                    attempt.time ? format_rfc3339(*attempt.time) : "-",
                                    markdown_text(findings.sources[attempt.source]),
                                    markdown_text(plain(findings.key(attempt.key))),
                                    Findings::payload_hex(attempt));
            }
        });
}

} // namespace

namespace {

void render_into(GroupShelf& groups, const FindingsSummary& summary, ReportFormat format,
                 ReportOut& report, std::size_t threads, std::size_t width) {
    switch (format) {
    case ReportFormat::table:
        render_table(groups, summary, report, threads, width);
        return;
    case ReportFormat::json:
        render_json(groups, summary, report, threads);
        return;
    case ReportFormat::markdown:
        render_markdown(groups, summary, report, threads);
        return;
    case ReportFormat::html:
        render_html(groups, summary, report.text(), [&report] { report.flush_when_large(); });
        return;
    }
}

} // namespace

std::string render(const Findings& findings, const FindingsSummary& summary, ReportFormat format,
                   std::size_t table_width) {
    FindingsShelf groups(findings);
    ReportOut report(nullptr, format == ReportFormat::json);
    render_into(groups, summary, format, report, 1, table_width);
    return report.finish();
}

void write_report(GroupShelf& groups, const FindingsSummary& summary, ReportFormat format,
                  io::Sink& sink, std::size_t threads, std::size_t table_width) {
    ReportOut report(&sink, format == ReportFormat::json);
    render_into(groups, summary, format, report, threads, table_width);
    report.finish();
}

} // namespace idem::audit
