#include "idem/audit/spill.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <filesystem>
#include <string>
#include <sys/resource.h>
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
    constexpr std::uint64_t k_plenty = 1 << 20;               // descriptors
    CHECK(spill_partitions(std::nullopt, 1, k_plenty) == 64); // a pipe: not known
    CHECK(spill_partitions(0, 1, k_plenty) == 64);
    CHECK(spill_partitions(1'000'000, 1, k_plenty) == 64);
    CHECK(spill_partitions(2'560'000, 1, k_plenty) == 64);
    CHECK(spill_partitions(3'000'000, 1, k_plenty) == 128);
    CHECK(spill_partitions(10'000'000, 2, k_plenty) == 256);
    CHECK(spill_partitions(std::uint64_t{1} << 40, 1, k_plenty) == 256);
}

TEST_CASE("a spill's partition files leave 64 descriptors to the rest of the run") {
    // 1024, a common soft limit: 256 by key and 256 by fingerprint fit.
    CHECK(spill_partitions(10'000'000, 2, 1024) == 256);
    CHECK(spill_partitions(10'000'000, 2, 500) == 128);
    CHECK(spill_partitions(10'000'000, 1, 300) == 128);
    CHECK(spill_partitions(10'000'000, 2, 300) == 64);
    // Never fewer than 64, as before the count followed the input.
    CHECK(spill_partitions(10'000'000, 2, 100) == 64);
    CHECK(spill_partitions(10'000'000, 2, 0) == 64);

    // A real limit: 300 descriptors, two partitionings of a 10M-record log.
    rlimit saved{};
    REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
    rlimit tight = saved;
    tight.rlim_cur = std::min<rlim_t>(saved.rlim_cur, 300);
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &tight) == 0);
    auto partitions = spill_partitions(10'000'000, 2);
    bool made = false;
    try {
        SpillLayout layout;
        layout.by_fingerprint = true;
        Spill spill(layout, std::filesystem::temp_directory_path(), partitions);
        made = true;
    } catch (const std::exception& error) {
        MESSAGE(error.what());
    }
    ::setrlimit(RLIMIT_NOFILE, &saved);
    CHECK(partitions == 64);
    CHECK(made);
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
