#include "idem/audit/detail/grouping.hpp"
#include "idem/audit/report.hpp"

#include "idem/io/sink.hpp"
#include "support/sink_text.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace idem;
using namespace idem::audit;

namespace {

// 1,000 key groups of two to four records from three sources, explained as
// a run would explain them: enough groups that a report is rendered in
// several jobs on several threads.
Findings many_groups() {
    Findings findings;
    findings.inputs = {"log.ndjson"};
    findings.sources = {"", "w1", "w2", "w3"};
    std::uint64_t line = 0;
    auto start = Timestamp(std::chrono::seconds(1'796'025'600));
    for (std::uint32_t key = 1; key <= 1000; ++key) {
        std::vector<std::size_t> members;
        for (std::uint32_t copy = 0; copy < 2 + key % 3; ++copy) {
            Attempt attempt;
            attempt.key = key;
            attempt.source = 1 + (key + copy) % 3;
            attempt.payload = key * 7919 + (key % 5 == 0 ? copy : 0);
            attempt.time = start + std::chrono::seconds(key * 10 + copy * (1 + key % 4));
            members.push_back(findings.attempts.size());
            findings.attempts.push_back(attempt);
            findings.positions.push_back({0, false, ++line});
        }
        findings.key_texts[key] = "\"k" + std::to_string(key) + "\"";
        findings.groups.push_back(
            explain(GroupKind::key, std::move(members), findings.attempts, findings.options));
    }
    findings.records = findings.attempts.size();
    findings.identified = findings.records;
    findings.intents = 1000;
    return findings;
}

std::string written(GroupShelf& groups, const FindingsSummary& summary, ReportFormat format,
                    std::size_t threads) {
    return test::written_through_sink(
        [&](io::Sink& sink) { write_report(groups, summary, format, sink, threads); });
}

} // namespace

TEST_CASE("a report rendered on several threads is the one rendered on one") {
    auto findings = many_groups();
    auto summary = summarize(findings);
    FindingsShelf shelf(findings);
    for (auto format : {ReportFormat::json, ReportFormat::table, ReportFormat::markdown}) {
        CAPTURE(static_cast<int>(format));
        auto alone = render(findings, summary, format);
        REQUIRE(alone.find("k1000") != std::string::npos);
        CHECK(written(shelf, summary, format, 1) == alone);
        CHECK(written(shelf, summary, format, 3) == alone);
        CHECK(written(shelf, summary, format, 8) == alone);
    }
}

TEST_CASE("each reader of a shelf keeps its own group") {
    auto findings = many_groups();
    FindingsShelf shelf(findings);
    auto reader = shelf.reader();
    REQUIRE(reader->size() == shelf.size());
    auto [first_findings, first] = shelf.at(0);
    auto [last_findings, last] = reader->at(999);
    CHECK(&first != &last);
    CHECK(first_findings.key(first_findings.attempts[first.records.front()].key) == "\"k1\"");
    CHECK(last_findings.key(last_findings.attempts[last.records.front()].key) == "\"k1000\"");
}

TEST_CASE("a text column numbers its distinct texts in order of first appearance") {
    detail::TextColumn column;
    std::vector<std::string> texts = {"b", "", "a", "b", "c", "a", "", "b"};
    for (int copy = 0; copy < 3000; ++copy) // past the first table size, many times over
        texts.push_back("k" + std::to_string(copy % 1500));
    for (const auto& text : texts)
        column.add(text);
    std::vector<std::uint32_t> ids;
    REQUIRE(column.assign_ids(ids) == 3 + 1500);
    CHECK(std::vector<std::uint32_t>(ids.begin(), ids.begin() + 8) ==
          std::vector<std::uint32_t>{1, 0, 2, 1, 3, 2, 0, 1});
    for (std::size_t i = 8; i < texts.size(); ++i) {
        CAPTURE(texts[i]);
        auto copy = (i - 8) % 1500;
        REQUIRE(ids[i] == 4 + copy);
        CHECK(column.text(i) == texts[i]);
    }
}
