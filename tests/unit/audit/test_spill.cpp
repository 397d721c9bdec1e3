#include "idem/audit/spill.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <string>
#include <vector>

using namespace idem;
using namespace idem::audit;

namespace {

// What a report shows of a group: its kind, its key and intent texts and
// where each record was, in the shelf's order.
std::vector<std::string> shown(GroupShelf& shelf) {
    std::vector<std::string> groups;
    for (std::size_t g = 0; g < shelf.size(); ++g) {
        auto [findings, group] = shelf.at(g);
        std::string text = group.kind == GroupKind::key ? "key" : "fingerprint";
        for (auto index : group.records) {
            const auto& attempt = findings.attempts[index];
            text += " " + findings.key(attempt.key) + "/" +
                    findings.fingerprint(attempt.fingerprint) + "@" + findings.position(index);
        }
        text += " payloads " + std::to_string(group.payloads);
        groups.push_back(text);
    }
    return groups;
}

// 3,000 records whose keys repeat (every 7th key twice or three times) and
// whose fingerprints repeat across keys, grouped on disk in `partitions`
// partition files.
std::vector<std::string> spilled_groups(std::size_t partitions, FindingsSummary& summary) {
    SpillLayout layout;
    layout.by_fingerprint = true;
    layout.keys_given = true;
    layout.key_paths = 1;
    layout.fingerprint_paths = 1;
    Spill spill(layout, std::filesystem::temp_directory_path(), partitions);
    std::uint64_t identified = 0;
    for (std::uint64_t seq = 0; seq < 3000; ++seq) {
        auto key = "s:k" + std::to_string(seq % 7 == 0 ? seq / 3 : seq);
        auto fingerprint = "s:f" + std::to_string(seq % 500);
        SpilledRecord record;
        record.seq = seq;
        record.position = {0, false, seq + 1};
        record.time = Timestamp(Duration(static_cast<Duration::rep>(seq) * 1'000'000));
        record.payload = seq % 3;
        record.key = key;
        record.fingerprint = fingerprint;
        spill.add(record);
        ++identified;
    }
    Spill::Context context;
    context.inputs = {"events.ndjson"};
    context.sources = {""};
    context.records = 3000;
    context.identified = identified;
    PayloadDifferences differences;
    context.differences = &differences;
    auto shelf = spill.explain_groups(std::move(context), summary, 3);
    return shown(*shelf);
}

} // namespace

TEST_CASE("a spill's partition count follows the records expected, 64 to 256") {
    CHECK(spill_partitions(std::nullopt) == 64); // a pipe: not known
    CHECK(spill_partitions(0) == 64);
    CHECK(spill_partitions(1'000'000) == 64);
    CHECK(spill_partitions(2'560'000) == 64);
    CHECK(spill_partitions(3'000'000) == 128);
    CHECK(spill_partitions(10'000'000) == 256);
    CHECK(spill_partitions(std::uint64_t{1} << 40) == 256);
}

TEST_CASE("groups found on disk are the same whatever the partition count") {
    FindingsSummary one_summary, few_summary, many_summary;
    auto one = spilled_groups(1, one_summary);
    auto few = spilled_groups(64, few_summary);
    auto many = spilled_groups(256, many_summary);
    REQUIRE_FALSE(one.empty());
    CHECK(few == one);
    CHECK(many == one);
    CHECK(many_summary.groups == one_summary.groups);
    CHECK(many_summary.duplicates == one_summary.duplicates);
    CHECK(many_summary.causes == one_summary.causes);
    // Key groups and fingerprint groups both came back.
    CHECK(std::count_if(one.begin(), one.end(),
                        [](const std::string& g) { return g.starts_with("key"); }) > 0);
    CHECK(std::count_if(one.begin(), one.end(),
                        [](const std::string& g) { return g.starts_with("fingerprint"); }) > 0);
}
