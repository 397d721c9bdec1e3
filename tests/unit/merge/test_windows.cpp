// The merger's windows as pure logic: which window each member joins, when
// windows close and in what order, late members, count and span triggers,
// and a round trip through the state a store keeps.

#include "idem/merge/windows.hpp"
#include "idem/util/errors.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::merge;

namespace {

MergeRule rule_with(WindowSpec window, std::string_view aggregates = "n=count(),total=sum(v)") {
    MergeRule rule;
    rule.name = std::string(1, 'r');
    rule.group = {record::FieldPath::parse("g")};
    rule.window = window;
    rule.aggregates = parse_aggregates(aggregates);
    return rule;
}

// Members with one numeric value each (for sum), in the order given.
struct Feeder {
    explicit Feeder(Merger& target, std::size_t aggregates = 2)
        : merger(target), merger_aggregates(aggregates) {}
    Merger& merger;
    std::size_t merger_aggregates;
    std::vector<std::vector<Value>> values; // kept alive while the merger reads them
    std::string source = "in";
    int line = 0;
    std::vector<std::string> add(std::string_view group, const char* time, const char* v = "1") {
        // Slot 0 is count(); every other aggregate reads the number.
        auto& member_values = values.emplace_back(merger_aggregates);
        for (std::size_t i = 1; i < member_values.size(); ++i)
            member_values[i] = {true, record::FieldValue::Type::number, v};
        Member member;
        member.group = group;
        member.time = test::instant(time);
        member.bytes = R"({"g":"x"})";
        member.source = &source;
        member.line = static_cast<std::uint64_t>(++line);
        member.values = member_values.data();
        std::vector<std::string> ids;
        auto joined = merger.add(member, &ids);
        CHECK(joined == ids.size());
        merger.advance(member.time);
        return ids;
    }
};

std::vector<std::pair<std::string, std::uint64_t>> summary_of(std::vector<WindowState> closed) {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    for (const auto& window : closed)
        out.emplace_back(format_rfc3339(window.start) + " " + window.group, window.count);
    return out;
}

} // namespace

TEST_CASE("tumbling windows close when the watermark passes their end, in close order") {
    std::vector<MergeRule> rules{rule_with({WindowKind::tumbling, std::chrono::minutes(5)})};
    Merger merger(rules, {});
    Feeder feed(merger);
    CHECK(feed.add("a", "2026-11-30T08:00:10Z").size() == 1);
    feed.add("b", "2026-11-30T08:01:00Z");
    feed.add("a", "2026-11-30T08:04:59Z", "2");
    CHECK(merger.take_closed().empty());
    feed.add("a", "2026-11-30T08:05:00Z"); // the watermark reaches 08:05: both close
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 2);
    CHECK(summary_of(closed) ==
          std::vector<std::pair<std::string, std::uint64_t>>{{"2026-11-30T08:00:00.000Z a", 2},
                                                             {"2026-11-30T08:00:00.000Z b", 1}});
    CHECK(closed[0].accumulators[1].int_sum == 3);
    CHECK(closed[0].positions == std::vector<std::string>{"in:1", "in:3"});
    // A member of a closed window is late; --max-lateness would have kept it open.
    CHECK(feed.add("a", "2026-11-30T08:03:00Z").empty());
    merger.close_all();
    CHECK(merger.take_closed().size() == 1);
}

TEST_CASE("max-lateness keeps windows open for members that arrive out of order") {
    std::vector<MergeRule> rules{rule_with({WindowKind::tumbling, std::chrono::minutes(1)})};
    MergerOptions options;
    options.max_lateness = std::chrono::seconds(30);
    Merger merger(rules, options);
    Feeder feed(merger);
    feed.add("a", "2026-11-30T08:00:50Z");
    feed.add("a", "2026-11-30T08:01:20Z");
    CHECK(feed.add("a", "2026-11-30T08:00:40Z").size() == 1); // 08:01 - 30s: still open
    feed.add("a", "2026-11-30T08:01:31Z");
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].count == 2);
}

TEST_CASE("sliding windows hold each member in every window that covers it") {
    std::vector<MergeRule> rules{rule_with(
        {WindowKind::sliding, std::chrono::minutes(10), std::chrono::minutes(5), Duration(0)})};
    Merger merger(rules, {});
    Feeder feed(merger);
    auto ids = feed.add("a", "2026-11-30T08:07:00Z");
    CHECK(ids.size() == 2); // [08:00, 08:10) and [08:05, 08:15)
    feed.add("a", "2026-11-30T08:12:00Z");
    merger.close_all();
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 3);
    CHECK(format_rfc3339(closed[0].start) == "2026-11-30T08:00:00.000Z");
    CHECK(closed[0].count == 1);
    CHECK(closed[1].count == 2);
    CHECK(closed[2].count == 1);
}

TEST_CASE("a session closes after its gap of quiet, or at its span or count") {
    auto rule =
        rule_with({WindowKind::session, Duration(0), Duration(0), std::chrono::seconds(30)});
    rule.max_span = std::chrono::minutes(2);
    std::vector<MergeRule> rules{rule};
    Merger merger(rules, {});
    Feeder feed(merger);
    feed.add("a", "2026-11-30T08:00:00Z");
    feed.add("a", "2026-11-30T08:00:20Z");
    feed.add("a", "2026-11-30T08:00:45Z");
    CHECK(merger.take_closed().empty());
    feed.add("a", "2026-11-30T08:01:30Z"); // 45 s of quiet: the first session closed
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].count == 3);
    CHECK(format_rfc3339(closed[0].last_at) == "2026-11-30T08:00:45.000Z");
    for (const char* time : {"2026-11-30T08:01:55Z", "2026-11-30T08:02:20Z", "2026-11-30T08:02:45Z",
                             "2026-11-30T08:03:10Z", "2026-11-30T08:03:35Z"})
        feed.add("a", time);
    closed = merger.take_closed(); // two minutes after 08:01:30, the span closes it
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].count == 5);
}

TEST_CASE("a window that reaches max_count closes at once, and the next part opens") {
    auto rule = rule_with({WindowKind::tumbling, std::chrono::hours(1)});
    rule.max_count = 2;
    std::vector<MergeRule> rules{rule};
    Merger merger(rules, {});
    Feeder feed(merger);
    auto first = feed.add("a", "2026-11-30T08:00:00Z");
    feed.add("a", "2026-11-30T08:00:01Z");
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].part == 0);
    auto third = feed.add("a", "2026-11-30T08:00:02Z");
    CHECK(third != first); // another part, another id
    merger.close_all();
    closed = merger.take_closed();
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].part == 1);
}

TEST_CASE("windows aligned to a zone's clock start at its midnight") {
    std::vector<MergeRule> rules{rule_with({WindowKind::tumbling, std::chrono::hours(24)})};
    MergerOptions options;
    options.zone = TimeZone::fixed(std::chrono::hours(8));
    Merger merger(rules, options);
    Feeder feed(merger);
    feed.add("a", "2026-11-30T17:00:00Z"); // 01:00 on Dec 1 at +08:00
    merger.close_all();
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 1);
    CHECK(format_rfc3339(closed[0].start) == "2026-11-30T16:00:00.000Z");
}

TEST_CASE("open windows saved and restored close as if the run had never stopped") {
    std::vector<MergeRule> rules{rule_with({WindowKind::tumbling, std::chrono::minutes(5)},
                                           "n=count(),total=sum(v),vs=distinct(v)")};
    MergerOptions tracked;
    tracked.track_changes = true;
    Merger first(rules, tracked);
    Feeder feed(first, 3);
    feed.add("a", "2026-11-30T08:00:00Z", "1.5");
    feed.add("b", "2026-11-30T08:01:00Z", "2");
    feed.add("a", "2026-11-30T08:02:00Z", "1.5");
    auto changes = first.drain_changes();
    CHECK(changes.saved.size() == 2);
    Merger second(rules, {});
    second.restore(changes.saved, changes.meta);
    CHECK(second.open_windows() == 2);
    Feeder more(second, 3);
    more.line = 3;
    CHECK(more.add("a", "2026-11-30T08:00:30Z").size() == 1);
    more.add("a", "2026-11-30T08:06:00Z");
    auto closed = second.take_closed();
    REQUIRE(closed.size() == 2);
    CHECK(closed[0].count == 3);
    CHECK(closed[0].accumulators[1].sum == doctest::Approx(4.0));
    CHECK(closed[0].accumulators[2].items.size() == 2); // 1.5 and 1
    CHECK(closed[0].positions == std::vector<std::string>{"in:1", "in:3", "in:4"});
    CHECK(window_id("r", closed[0]) == window_id("r", closed[0]));
}

TEST_CASE("past --max-open the run stops with an input error that says what to change") {
    std::vector<MergeRule> rules{rule_with({WindowKind::tumbling, std::chrono::minutes(5)})};
    MergerOptions options;
    options.max_open = 2;
    Merger merger(rules, options);
    Feeder feed(merger);
    feed.add("a", "2026-11-30T08:00:00Z");
    feed.add("b", "2026-11-30T08:00:00Z");
    CHECK_THROWS_WITH_AS(feed.add("c", "2026-11-30T08:00:00Z"),
                         doctest::Contains("raise --max-open"), InputError);
}

TEST_CASE("a member of several sliding windows gives every one of them its values") {
    std::vector<MergeRule> rules{rule_with(
        {WindowKind::sliding, std::chrono::minutes(2), std::chrono::minutes(1), Duration(0)},
        "vs=append(v),ds=distinct(v)")};
    Merger merger(rules, {});
    std::vector<std::vector<Value>> values;
    std::string source = "in";
    auto add = [&](const char* time, const char* v) {
        auto& member_values = values.emplace_back(2);
        for (auto& value : member_values)
            value = {true, record::FieldValue::Type::string, v};
        Member member;
        member.group = "x";
        member.time = test::instant(time);
        member.bytes = R"({"g":"x"})";
        member.source = &source;
        member.values = member_values.data();
        CHECK(merger.add(member) == 2);
    };
    add("2026-11-30T08:00:30Z", "a");
    add("2026-11-30T08:00:40Z", "a");
    add("2026-11-30T08:00:50Z", "b");
    merger.close_all();
    auto closed = merger.take_closed();
    REQUIRE(closed.size() == 2);
    for (const auto& window : closed) {
        const auto& appended = window.accumulators[0].items;
        REQUIRE(appended.size() == 3);
        CHECK(appended[0].text.view() == "a");
        CHECK(appended[2].text.view() == "b");
        const auto& distinct = window.accumulators[1].items;
        REQUIRE(distinct.size() == 2);
        CHECK(distinct[1].text.view() == "b");
    }
}

TEST_CASE("the windows a member joins share one copy of it, and the byte bound stops the run") {
    std::vector<MergeRule> rules{rule_with(
        {WindowKind::sliding, std::chrono::hours(1), std::chrono::minutes(1), Duration(0)},
        "events=append(.)")};
    std::string big(100'000, 'x');
    std::string source = "in";
    auto feed = [&](Merger& merger, int count) {
        std::vector<std::vector<Value>> values;
        for (int i = 0; i < count; ++i) {
            auto& member_values = values.emplace_back(1);
            member_values[0] = {true, record::FieldValue::Type::object, big};
            Member member;
            member.group = "x";
            member.time = test::instant("2026-11-30T08:00:00Z") + std::chrono::seconds(i);
            member.bytes = big;
            member.source = &source;
            member.line = static_cast<std::uint64_t>(i + 1);
            member.values = member_values.data();
            merger.add(member);
        }
    };
    Merger merger(rules, {});
    feed(merger, 50); // each in 60 windows
    // 50 members of 100 KB, each kept once as a value and the first once as
    // the windows' base: about 5 MB, not 60 times that.
    CHECK(merger.peak_open_bytes() > 5'000'000);
    CHECK(merger.peak_open_bytes() < 6'000'000);
    MergerOptions bounded;
    bounded.max_open_bytes = 2'000'000;
    Merger small(rules, bounded);
    CHECK_THROWS_WITH_AS(feed(small, 50), doctest::Contains("more than --max-open-bytes"),
                         InputError);
}
