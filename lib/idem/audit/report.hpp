#pragma once
// What `idem audit` found, and the reports a person or a script reads
// (docs/audit.md): a table that fits the reader's terminal, stable JSON,
// Markdown for a postmortem.

#include "idem/audit/differences.hpp"
#include "idem/audit/explain.hpp"
#include "idem/audit/what_if.hpp"
#include "idem/io/sink.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/util/render.hpp"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace idem::audit {

enum class ReportFormat { table, json, markdown, html };

// What replay's ledger says of each key it sent (--replay-ledger), by the
// key as the report shows it (its JSON): the evidence beside a key group.
using ReplayLedger = std::unordered_map<std::string, store::ReplayEntry>;

// What verify said of a record (--verdicts), by where the record was
// ("captures.ndjson:12"): shown beside that record.
struct KeptVerdict {
    bool valid = false;
    std::string reason;
};
using KeptVerdicts = std::unordered_map<std::string, KeptVerdict>;

// Everything the report needs, strings interned: id 0 of each table is ""
// (the field was absent).
struct Findings {
    std::vector<Attempt> attempts; // every record, or (after a spill) those in groups
    std::uint64_t records = 0;     // every record read
    // Keys and intents of the records in groups, as JSON ("k_1", ["a",1]),
    // by id; key() and fingerprint() give "" for the others.
    std::unordered_map<std::uint32_t, std::string> key_texts, fingerprint_texts;
    std::uint64_t intents = 0;        // distinct intents (fingerprints, or keys)
    std::uint64_t identified = 0;     // records with an intent
    std::vector<std::string> sources; // as text
    // Where each attempt came from, compactly: formatted only when shown.
    using Position = RecordPosition;
    std::vector<std::string> inputs;
    std::vector<Position> positions; // per attempt

    [[nodiscard]] const std::string& key(std::uint32_t id) const;
    [[nodiscard]] const std::string& fingerprint(std::uint32_t id) const;
    // "events.ndjson:12", "service.db:row 3".
    [[nodiscard]] std::string position(std::size_t attempt) const;
    void append_position(std::string& out, std::size_t attempt) const;
    // The payload digest's first 48 bits, in hex: enough to tell payloads
    // apart within one report.
    [[nodiscard]] static std::string payload_hex(const Attempt& attempt);
    static void append_payload_hex(std::string& out, const Attempt& attempt);
    std::vector<Explanation> groups; // worst first
    bool fingerprinted = false;      // --fingerprint given: intents are fingerprints
    ExplainOptions options;
    const ReplayLedger* replayed = nullptr; // --replay-ledger, when given
    const KeptVerdicts* verdicts = nullptr; // --verdicts, when given
    // The fields that differ between a group's payloads, by the position of
    // its first record; filled once the groups are found, before rendering.
    const PayloadDifferences* differences = nullptr;
    // The comparisons shown for `group`, if its records were read again.
    [[nodiscard]] const std::vector<PayloadComparison>*
    differences_of(const Explanation& group) const;
    // verify's verdict on a record, if it kept one.
    [[nodiscard]] const KeptVerdict* verdict_of(std::size_t attempt) const;
    // The same, for a record whose position is already written out.
    [[nodiscard]] const KeptVerdict* verdict_at(const std::string& position) const;
    // The ledger's entry for a key group's key, if replay sent it.
    [[nodiscard]] const store::ReplayEntry* replay_of(const Explanation& group) const;
};

// "events.ndjson:12", "service.db:row 3": where the record at `at` of
// `inputs` lies, appended to `out`.
void append_position(std::string& out, const std::vector<std::string>& inputs,
                     const RecordPosition& at);

// verify's verdict on the record at `position` of `inputs`, classified as
// causes read it (explain.hpp); unknown when it kept none.
[[nodiscard]] SignatureVerdict signature_verdict(const KeptVerdicts& verdicts,
                                                 const std::vector<std::string>& inputs,
                                                 const Findings::Position& position);

struct FindingsSummary {
    std::uint64_t records = 0;
    std::uint64_t groups = 0;
    std::uint64_t duplicates = 0; // records beyond the first of each intent
    double duplicate_ratio = 0;
    std::size_t worst = 0;                 // index into groups, when there are any
    std::map<Cause, std::uint64_t> causes; // groups per cause
    std::vector<std::pair<std::string, std::uint64_t>> sources; // records in groups, most first
    // --what-if / --suggest: the log judged with other TTLs.
    std::optional<WhatIf> what_if;
    // Duplicates under another key of the same intent (key-regenerated):
    // no TTL on the key catches them.
    std::uint64_t other_keys = 0;
    // Fields learned from the log as the delivery's (per_delivery.hpp):
    // never counted as payload. And the retried groups they were learned
    // from.
    std::vector<std::string> per_delivery;
    std::uint64_t per_delivery_groups = 0;
    // With --fingerprint: one intent is one fingerprint within this of its
    // first record (--window).
    std::optional<Duration> intent_window;
};

[[nodiscard]] FindingsSummary summarize(const Findings& findings);

// How a report reaches the groups, worst first: all in memory, or read back
// one at a time from the disk (spill.hpp) so that a report of a million
// groups never holds them all.
class GroupShelf {
public:
    virtual ~GroupShelf() = default;
    [[nodiscard]] virtual std::size_t size() const = 0;
    // Whether group `g` holds more than one payload, known without reading
    // it (a spilled group is a read from the disk).
    [[nodiscard]] virtual bool mixes_payloads(std::size_t g) const = 0;
    struct Shelved {
        const Findings& findings; // what the group's record indexes point into
        const Explanation& group;
    };
    // Group `g`; valid until the next call.
    virtual Shelved at(std::size_t g) = 0;
    // Another reader of the same groups, for a thread of its own: what one
    // reader's `at` returns is never disturbed by another's.
    [[nodiscard]] virtual std::unique_ptr<GroupShelf> reader() const = 0;
};

// Every group of `findings`, in memory.
class FindingsShelf final : public GroupShelf {
public:
    explicit FindingsShelf(const Findings& findings) : m_findings(findings) {}
    [[nodiscard]] std::size_t size() const override { return m_findings.groups.size(); }
    [[nodiscard]] bool mixes_payloads(std::size_t g) const override {
        return m_findings.groups[g].payloads > 1;
    }
    Shelved at(std::size_t g) override { return {m_findings, m_findings.groups[g]}; }
    [[nodiscard]] std::unique_ptr<GroupShelf> reader() const override {
        return std::make_unique<FindingsShelf>(m_findings);
    }

private:
    const Findings& m_findings;
};
// `summary` is summarize(findings), computed once by the caller.
// A table's lines are cut to `table_width` display columns (k_never_cut:
// as long as they are).
[[nodiscard]] std::string render(const Findings& findings, const FindingsSummary& summary,
                                 ReportFormat format, std::size_t table_width = k_never_cut);
// The same, written to `sink` as it is rendered. Throws FileSystemError.
// The groups' texts are rendered on `threads` threads (readers of
// `groups`), and written in order.
void write_report(GroupShelf& groups, const FindingsSummary& summary, ReportFormat format,
                  io::Sink& sink, std::size_t threads = 1, std::size_t table_width = k_never_cut);
// One self-contained page: nothing is loaded from anywhere (report_html.cpp).
// Appends to `out`, calling `flush` between groups.
void render_html(GroupShelf& groups, const FindingsSummary& summary, std::string& out,
                 const std::function<void()>& flush);

} // namespace idem::audit
