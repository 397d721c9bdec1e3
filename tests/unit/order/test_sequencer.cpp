#include "idem/order/sequencer.hpp"
#include "idem/store/checkpoints.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "support/instants.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <map>
#include <random>
#include <set>

using namespace idem;
using namespace idem::order;

namespace {

// What the sequencer said, in the order it said it: "p:7" for a released
// record (its bytes), "gap p 3-5" for a gap.
struct Recorder final : SequencerEvents {
    std::vector<std::string> said;
    std::vector<std::pair<std::int64_t, std::int64_t>> gaps;
    void release(const Partition&, std::string_view bytes) override { said.emplace_back(bytes); }
    void gap(const Partition& partition, std::int64_t from, std::int64_t to) override {
        said.push_back("gap " + partition.key() + " " + std::to_string(from) + "-" +
                       std::to_string(to));
        gaps.emplace_back(from, to);
    }
};

struct Harness {
    Recorder recorder;
    Sequencer sequencer;
    std::vector<std::string> late, duplicates;
    explicit Harness(SequencerOptions options) : sequencer(options, recorder) {}

    Partition& partition(const std::string& key) {
        if (auto* found = sequencer.find(key)) return *found;
        return sequencer.add(key, std::nullopt);
    }

    void offer(const std::string& key, std::int64_t sequence, long long second = 0) {
        auto bytes = key + ":" + std::to_string(sequence);
        auto result =
            sequencer.offer(partition(key), {sequence, 0}, bytes, test::unix_seconds(second));
        if (result.verdict == Verdict::late) late.push_back(bytes);
        if (result.verdict == Verdict::duplicate) duplicates.push_back(bytes);
    }
};

SequencerOptions sequence_options(std::size_t window, std::optional<std::int64_t> start = 1) {
    SequencerOptions options;
    options.window = window;
    options.start = start;
    return options;
}

using Said = std::vector<std::string>;

} // namespace

TEST_CASE("records in order leave at once; out of order, they wait for their predecessors") {
    Harness run(sequence_options(10));
    run.offer("a", 1);
    CHECK(run.recorder.said == Said{"a:1"});
    run.offer("a", 3);
    run.offer("b", 1);
    run.offer("a", 4);
    CHECK(run.recorder.said == Said{"a:1", "b:1"});
    run.offer("a", 2);
    CHECK(run.recorder.said == Said{"a:1", "b:1", "a:2", "a:3", "a:4"});
    CHECK(run.sequencer.counts().held == 0);
    CHECK(run.sequencer.counts().peak_held == 2);
}

TEST_CASE("a full window lets the lowest record go and reports the gap before it") {
    Harness run(sequence_options(2));
    run.offer("a", 1);
    run.offer("a", 4);
    run.offer("a", 5);
    CHECK(run.recorder.said == Said{"a:1"});
    run.offer("a", 7); // three held: more than the window
    CHECK(run.recorder.said == Said{"a:1", "gap a 2-3", "a:4", "a:5"});
    CHECK(run.sequencer.counts().gaps == 1);
    CHECK(run.sequencer.counts().missing == 2);
    run.offer("a", 3); // its gap was reported: late
    CHECK(run.late == Said{"a:3"});
    run.sequencer.flush();
    CHECK(run.recorder.said == Said{"a:1", "gap a 2-3", "a:4", "a:5", "gap a 6-6", "a:7"});
}

TEST_CASE("without --start, a partition starts at the smallest sequence seen while its window "
          "fills") {
    Harness run(sequence_options(3, std::nullopt));
    run.offer("a", 12);
    run.offer("a", 10);
    run.offer("a", 13);
    CHECK(run.recorder.said.empty());
    run.offer("a", 15); // four held, more than the window: it starts at 10, no gap before it
    CHECK(run.recorder.said == Said{"a:10"});
    run.offer("a", 11);
    CHECK(run.recorder.said == Said{"a:10", "a:11", "a:12", "a:13"});
    CHECK(run.recorder.gaps.empty());
}

TEST_CASE("a record already held is a duplicate; one already released is late") {
    Harness run(sequence_options(10));
    run.offer("a", 1);
    run.offer("a", 3);
    run.offer("a", 3);
    run.offer("a", 1);
    CHECK(run.duplicates == Said{"a:3"});
    CHECK(run.late == Said{"a:1"});
    CHECK(run.sequencer.counts().duplicates == 1);
    CHECK(run.sequencer.counts().late == 1);
}

TEST_CASE("--gap-timeout skips a gap that has waited long enough by the given clock") {
    auto options = sequence_options(100);
    options.gap_timeout = std::chrono::seconds(30);
    Harness run(options);
    run.offer("a", 1, 0);
    run.offer("a", 3, 10); // waiting for 2 since second 10
    run.offer("a", 4, 20);
    run.sequencer.advance_clock(test::unix_seconds(39));
    CHECK(run.recorder.said == Said{"a:1"});
    CHECK(run.sequencer.next_deadline() == test::unix_seconds(40));
    run.sequencer.advance_clock(test::unix_seconds(40));
    CHECK(run.recorder.said == Said{"a:1", "gap a 2-2", "a:3", "a:4"});
    CHECK(run.sequencer.counts().timeouts == 1);
    CHECK_FALSE(run.sequencer.next_deadline());
}

TEST_CASE("--max-held lets the longest-blocked partition go first") {
    auto options = sequence_options(100);
    options.max_held = 2;
    Harness run(options);
    run.offer("a", 3);
    run.offer("b", 5);
    CHECK(run.recorder.said.empty());
    run.offer("c", 2); // three held overall: "a" has waited longest
    CHECK(run.recorder.said == Said{"gap a 1-2", "a:3"});
}

TEST_CASE("time mode releases under a watermark, keeps ties in arrival order, routes late ones") {
    SequencerOptions options;
    options.mode = OrderMode::time;
    options.max_lateness = std::chrono::seconds(5);
    Recorder recorder;
    Sequencer sequencer(options, recorder);
    auto& partition = sequencer.add("", std::nullopt);
    auto offer = [&](long long second, const std::string& name) {
        return sequencer.offer(partition,
                               {test::unix_seconds(second).time_since_epoch().count(), 0}, name,
                               test::unix_seconds(second));
    };
    offer(10, "t10");
    offer(8, "t8");
    offer(12, "t12a");
    offer(12, "t12b");
    CHECK(recorder.said.empty());
    offer(15, "t15"); // watermark 10
    CHECK(recorder.said == Said{"t8", "t10"});
    CHECK(offer(9, "t9").verdict == Verdict::late);
    CHECK(offer(11, "t11").verdict == Verdict::accepted);
    offer(30, "t30"); // watermark 25
    CHECK(recorder.said == Said{"t8", "t10", "t11", "t12a", "t12b", "t15"});
    sequencer.flush();
    CHECK(recorder.said.back() == "t30");
}

TEST_CASE("hybrid logical clock stamps order by physical time, then the counter") {
    SequencerOptions options;
    options.mode = OrderMode::time;
    options.max_lateness = std::chrono::seconds(1);
    Recorder recorder;
    Sequencer sequencer(options, recorder);
    auto& partition = sequencer.add("", std::nullopt);
    sequencer.offer(partition, {1000, 2}, "1000.2", test::unix_seconds(0));
    sequencer.offer(partition, {1000, 1}, "1000.1", test::unix_seconds(0));
    sequencer.offer(partition, {999, 7}, "999.7", test::unix_seconds(0));
    sequencer.flush();
    CHECK(recorder.said == Said{"999.7", "1000.1", "1000.2"});
}

namespace {

struct Input {
    std::string partition;
    std::int64_t sequence;
};

// Partitions with sequences 1..n, some numbers dropped (gaps), some records
// sent twice (duplicates), each displaced by at most `displacement`
// positions, and a few moved far back (late).
std::vector<Input> random_stream(std::mt19937& random, int partitions, int per_partition,
                                 int displacement) {
    std::vector<std::pair<double, Input>> keyed;
    std::uniform_real_distribution<double> jitter(0, displacement);
    std::uniform_int_distribution<int> percent(0, 99);
    int position = 0;
    for (int n = 1; n <= per_partition; ++n)
        for (int p = 0; p < partitions; ++p) {
            ++position;
            if (percent(random) < 5) continue; // never sent: a gap
            Input input{"p" + std::to_string(p), n};
            double place = position + jitter(random);
            if (percent(random) < 2) place += displacement * 50; // very late
            keyed.emplace_back(place, input);
            if (percent(random) < 3) keyed.emplace_back(place + jitter(random), input);
        }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& left, const auto& right) { return left.first < right.first; });
    std::vector<Input> stream;
    for (auto& [place, input] : keyed)
        stream.push_back(input);
    return stream;
}

} // namespace

TEST_CASE("property: output plus side outputs is the input; order holds; gaps are exactly the "
          "missing numbers") {
    std::mt19937 random(20261130);
    for (int trial = 0; trial < 40; ++trial) {
        int partitions = 1 + trial % 7;
        int displacement = 1 + trial % 13;
        auto stream = random_stream(random, partitions, 60, displacement * partitions);
        auto options = sequence_options(static_cast<std::size_t>(1 + trial % 9));
        options.max_held = static_cast<std::size_t>(5 + trial * 3);
        Harness run(options);
        for (const auto& input : stream)
            run.offer(input.partition, input.sequence);
        run.sequencer.flush();

        // Conservation: every input is released, late or a duplicate.
        std::multiset<std::string> in, out;
        for (const auto& input : stream)
            in.insert(input.partition + ":" + std::to_string(input.sequence));
        std::map<std::string, std::vector<std::int64_t>> released;
        std::map<std::string, std::set<std::int64_t>> in_gaps;
        for (const auto& said : run.recorder.said) {
            if (said.starts_with("gap ")) {
                auto space = said.find(' ', 4);
                auto dash = said.find('-', space);
                auto from = std::stoll(said.substr(space + 1, dash - space - 1));
                auto to = std::stoll(said.substr(dash + 1));
                auto& gaps = in_gaps[said.substr(4, space - 4)];
                for (auto n = from; n <= to; ++n)
                    CHECK(gaps.insert(n).second); // gaps never overlap
                continue;
            }
            out.insert(said);
            auto colon = said.find(':');
            released[said.substr(0, colon)].push_back(std::stoll(said.substr(colon + 1)));
        }
        for (const auto& side : {run.late, run.duplicates})
            out.insert(side.begin(), side.end());
        CHECK(in == out);
        CHECK(run.sequencer.counts().held == 0);
        for (const auto& [partition, sequences] : released) {
            // Strictly increasing, and every number from the start to the
            // last one released is either released or inside a reported gap.
            CHECK(std::is_sorted(sequences.begin(), sequences.end(),
                                 [](auto left, auto right) { return left <= right; }));
            std::set<std::int64_t> seen(sequences.begin(), sequences.end());
            CHECK(seen.size() == sequences.size());
            const auto& gaps = in_gaps[partition];
            for (std::int64_t n = 1; n <= sequences.back(); ++n)
                CHECK(seen.count(n) + gaps.count(n) == 1);
            CHECK((gaps.empty() || *gaps.rbegin() < sequences.back()));
        }
    }
}

TEST_CASE("property: with a window wider than the displacement, nothing is late and no gap is "
          "invented") {
    std::mt19937 random(7);
    for (int trial = 0; trial < 20; ++trial) {
        std::vector<std::pair<double, int>> keyed;
        std::uniform_real_distribution<double> jitter(0, 8);
        for (int n = 1; n <= 500; ++n)
            keyed.emplace_back(n + jitter(random), n);
        std::sort(keyed.begin(), keyed.end());
        Harness run(sequence_options(16));
        for (auto& [place, n] : keyed)
            run.offer("a", n);
        CHECK(run.recorder.gaps.empty());
        CHECK(run.late.empty());
        CHECK(run.recorder.said.size() == 500);
        CHECK(run.sequencer.counts().held == 0);
    }
}

TEST_CASE("property: stopping anywhere with --hold and resuming from the store's changes gives "
          "one run's output") {
    std::mt19937 random(99);
    for (int trial = 0; trial < 30; ++trial) {
        auto stream = random_stream(random, 3, 40, 12);
        auto options = sequence_options(6, std::nullopt);
        options.max_held = 12;
        Harness whole(options);
        for (const auto& input : stream)
            whole.offer(input.partition, input.sequence);
        whole.sequencer.flush();

        auto store = store::open_store(store::parse_store_uri(":memory:"));
        std::uniform_int_distribution<std::size_t> cut_at(0, stream.size());
        auto cut = cut_at(random);
        Said said, late;
        {
            Harness first(options);
            for (std::size_t i = 0; i < cut; ++i) {
                first.offer(stream[i].partition, stream[i].sequence);
                if (i % 17 == 0)
                    store->sequencer().save_reorder_changes("s", first.sequencer.take_changes());
            }
            store->sequencer().save_reorder_changes("s", first.sequencer.take_changes());
            said = first.recorder.said;
            late = first.late;
            late.insert(late.end(), first.duplicates.begin(), first.duplicates.end());
        }
        Harness second(options);
        auto held = store->sequencer().load_held("s");
        std::vector<std::string> keys;
        for (const auto& row : held)
            if (std::find(keys.begin(), keys.end(), row.partition) == keys.end())
                keys.push_back(row.partition);
        auto progress = store->sequencer().load_partitions("s", keys);
        for (std::size_t i = 0; i < keys.size(); ++i)
            second.sequencer.add(keys[i], progress[i]);
        second.sequencer.restore(std::move(held));
        for (std::size_t i = cut; i < stream.size(); ++i) {
            const auto& input = stream[i];
            if (!second.sequencer.find(input.partition)) {
                auto known = store->sequencer().load_partitions("s", {input.partition});
                second.sequencer.add(input.partition, known[0]);
            }
            second.offer(input.partition, input.sequence);
        }
        second.sequencer.flush();
        said.insert(said.end(), second.recorder.said.begin(), second.recorder.said.end());
        late.insert(late.end(), second.late.begin(), second.late.end());
        late.insert(late.end(), second.duplicates.begin(), second.duplicates.end());
        Said whole_late = whole.late;
        whole_late.insert(whole_late.end(), whole.duplicates.begin(), whole.duplicates.end());
        std::sort(late.begin(), late.end());
        std::sort(whole_late.begin(), whole_late.end());
        CHECK(said == whole.recorder.said);
        CHECK(late == whole_late);
    }
}

TEST_CASE("pass_in_order: only the exact next record of a partition holding nothing") {
    Harness run(sequence_options(10)); // partitions start at 1
    auto& a = run.partition("a");
    CHECK(run.sequencer.pass_in_order(a, {1, 0}));
    CHECK(run.sequencer.counts().released == 1);
    CHECK(run.recorder.said.empty());                    // the passed record is the caller's
    CHECK_FALSE(run.sequencer.pass_in_order(a, {1, 0})); // again: late, offer() says so
    CHECK_FALSE(run.sequencer.pass_in_order(a, {3, 0})); // ahead: it must wait
    run.offer("a", 3);
    // 2 is next, but 3 is held behind it: offer() releases both, in order.
    CHECK_FALSE(run.sequencer.pass_in_order(a, {2, 0}));
    run.offer("a", 2);
    CHECK(run.recorder.said == Said{"a:2", "a:3"});
    CHECK(run.sequencer.pass_in_order(a, {4, 0}));
    // What persists moved on too.
    auto changes = run.sequencer.take_changes();
    REQUIRE(changes.progress.size() == 1);
    CHECK(changes.progress.front().next.primary == 5);
}

TEST_CASE("pass_in_order waits while a partition's start is not known") {
    Harness run(sequence_options(10, std::nullopt));
    CHECK_FALSE(run.sequencer.pass_in_order(run.partition("a"), {1, 0}));
    CHECK_FALSE(run.sequencer.passes_in_order(run.partition("a")));
}

TEST_CASE("passed_in_order: records a caller passed itself count and move the partition on") {
    Harness run(sequence_options(10)); // partitions start at 1
    auto& a = run.partition("a");
    REQUIRE(run.sequencer.passes_in_order(a));
    run.sequencer.take_changes();
    // The caller passed 1, 2 and 3 on its own, then tells.
    run.sequencer.passed_in_order(a, 4, 3);
    CHECK(run.sequencer.counts().released == 3);
    CHECK(run.recorder.said.empty());
    auto changes = run.sequencer.take_changes();
    REQUIRE(changes.progress.size() == 1);
    CHECK(changes.progress.front().next.primary == 4);
    // Nothing passed: nothing changes.
    run.sequencer.passed_in_order(a, 4, 0);
    CHECK(run.sequencer.take_changes().progress.empty());
    // After that, offer() goes on from 4: 3 is late, 5 waits for 4.
    run.offer("a", 3);
    CHECK(run.late == Said{"a:3"});
    run.offer("a", 5);
    CHECK_FALSE(run.sequencer.passes_in_order(a)); // 5 is held
    run.offer("a", 4);
    CHECK(run.recorder.said == Said{"a:4", "a:5"});
    CHECK(run.sequencer.passes_in_order(a));
}

TEST_CASE("pass_in_order never applies in time order") {
    SequencerOptions options;
    options.mode = OrderMode::time;
    Harness run(options);
    run.offer("a", 10);
    CHECK_FALSE(run.sequencer.pass_in_order(run.partition("a"), {11, 0}));
    CHECK_FALSE(run.sequencer.passes_in_order(run.partition("a")));
}
