// The checker: every finding, from events in order.

#include "idem/states/checker.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::states;

namespace {

Machine orders() {
    auto machine = parse_allow("pending>paid:confirm,pending>cancelled,paid>shipped,shipped>closed,"
                               "processing>processing:start",
                               {"pending", "processing"}, {"closed", "cancelled"});
    return machine;
}

struct Feed {
    Checker& checker;
    std::vector<Finding> operator()(const char* entity, const char* state, const char* op = "",
                                    std::optional<std::int64_t> version = std::nullopt) {
        Event event;
        event.entity = entity;
        event.state = state;
        event.operation = op;
        event.version = version;
        event.position = "log:1";
        return checker.judge(event).findings;
    }
};

using Findings = std::vector<Finding>;

} // namespace

TEST_CASE("each finding, judged in order") {
    auto machine = orders();
    Checker checker(machine, true);
    Feed feed{checker};
    CHECK(feed("o1", "pending") == Findings{});
    CHECK(feed("o1", "paid", "confirm") == Findings{});
    CHECK(feed("o2", "pending") == Findings{});
    CHECK(feed("o2", "paid", "cancel") == Findings{Finding::illegal}); // wrong operation
    CHECK(feed("o3", "shipped") == Findings{Finding::bad_start});
    CHECK(feed("o4", "lost") == Findings{Finding::unknown_state});
    CHECK(feed("o1", "shipped") == Findings{});
    CHECK(feed("o1", "closed") == Findings{});
    CHECK(feed("o1", "paid") == Findings{Finding::after_final});
    CHECK(feed("o1", "paid") == Findings{Finding::after_final});
    // The seed's repeated "start processing" is allowed where the machine says so...
    CHECK(feed("t1", "processing", "start") == Findings{});
    CHECK(feed("t1", "processing", "start") == Findings{});
    // ...and a repeat anywhere else is a finding.
    CHECK(feed("o5", "pending") == Findings{});
    CHECK(feed("o5", "pending") == Findings{Finding::repeated});
    CHECK(checker.counts()[static_cast<std::size_t>(Finding::after_final)] == 2);
    auto observed = checker.observed();
    CHECK(observed.transitions.at({"pending", "paid"}).total() == 2);
    CHECK(observed.first_states.at("pending") == 3);
}

TEST_CASE("versions: a repeat, a lost update, a stale write and a gap") {
    auto machine = orders();
    Checker checker(machine, false);
    Feed feed{checker};
    CHECK(feed("o1", "pending", "", 1) == Findings{});
    CHECK(feed("o1", "paid", "confirm", 2) == Findings{});
    Event late;
    late.entity = "o1";
    late.state = "paid";
    late.version = 2;
    CHECK(checker.judge_out_of_order(late).findings == Findings{Finding::repeated});
    late.state = "cancelled";
    CHECK(checker.judge_out_of_order(late).findings == Findings{Finding::version_conflict});
    late.version = 1;
    CHECK(checker.judge_out_of_order(late).findings == Findings{Finding::stale});
    CHECK(checker.judge_duplicate(late, "pending").findings == Findings{Finding::version_conflict});
    CHECK(checker.gap("o1", 3, 4).findings == Findings{Finding::version_gap});
    // What the missing versions did is unknown: the next step is not judged.
    CHECK(feed("o1", "closed", "", 5) == Findings{});
    CHECK(feed("o1", "paid", "", 6) == Findings{Finding::after_final});
}

TEST_CASE("stuck: entities not in a final state long enough before the last event") {
    auto machine = orders();
    Checker checker(machine, false);
    auto at = [](int minutes) { return Timestamp(std::chrono::minutes(minutes)); };
    Event event;
    event.entity = "o1";
    event.state = "pending";
    event.time = at(0);
    (void)checker.judge(event);
    event.entity = "o2";
    event.time = at(50);
    (void)checker.judge(event);
    event.state = "cancelled";
    event.entity = "o3";
    event.time = at(1);
    (void)checker.judge(event);
    auto stuck = checker.stuck(at(60), std::chrono::minutes(30));
    REQUIRE(stuck.size() == 1);
    CHECK(stuck[0].entity == "o1");
}

TEST_CASE("an entity from an earlier run goes on from its state") {
    auto machine = orders();
    Checker checker(machine, true);
    EntityState before;
    before.state = "paid";
    before.version = 7;
    before.events = 2;
    checker.restore("o1", before);
    Feed feed{checker};
    CHECK(feed("o1", "shipped", "", 8) == Findings{});
    auto changed = checker.take_changed();
    REQUIRE(changed.size() == 1);
    CHECK(changed[0].second.state == "shipped");
    CHECK(changed[0].second.version == 8);
    CHECK(changed[0].second.events == 3);
}

TEST_CASE("a state the worker resolved is judged as the same name the checker interns") {
    auto machine = orders();
    Checker resolved(machine, false), named(machine, false);
    CHECK(resolved.declared_state("pending") != 0);
    CHECK(resolved.declared_state("pending") != resolved.declared_state("paid"));
    CHECK(resolved.declared_state("lost") == 0); // not declared: the checker interns it
    CHECK(resolved.declared_state("") == 0);
    const char* lives[][3] = {
        {"o1", "pending", ""}, {"o1", "paid", "confirm"}, {"o1", "lost", ""},
        {"o1", "found", ""},   {"o1", "shipped", ""},     {"o2", "closed", ""},
        {"o2", "closed", ""},  {"o3", "pending", ""},     {"o3", "shipped", ""}};
    for (const auto& [entity, state, op] : lives) {
        Event event;
        event.entity = entity;
        event.state = state;
        event.operation = op;
        auto by_name = named.judge(event);
        event.state_id = resolved.declared_state(state);
        auto by_id = resolved.judge(event);
        CHECK(by_id.findings == by_name.findings);
        CHECK(by_id.from == by_name.from);
    }
    CHECK(resolved.observed().transitions == named.observed().transitions);
    // Transitions between undeclared names are counted too.
    CHECK(resolved.observed().transitions.at({"lost", "found"}).total() == 1);
    CHECK(resolved.observed().transitions.at({"paid", "lost"}).total() == 1);
}

TEST_CASE("a judgement's previous state outlives the names interned after it") {
    auto machine = orders();
    Checker checker(machine, false);
    Event event;
    event.entity = "o1";
    event.state = "pending";
    checker.judge(event);
    event.state = "paid";
    event.operation = "an operation name longer than any short string";
    auto judgement = checker.judge(event);
    REQUIRE(judgement.from);
    for (int i = 0; i < 1000; ++i) { // names interned: the list of them grows
        Event other;
        other.entity = "o2";
        auto name = "state number " + std::to_string(i) + " of many";
        other.state = name;
        checker.judge(other);
    }
    CHECK(*judgement.from == "pending");
}

TEST_CASE("a machine learned from hostile names checks its own log with no finding") {
    // Names a log can hold: line breaks, YAML's own syntax, terminal escapes,
    // C1, bidi and zero-width characters, DEL, quotes and non-ASCII.
    const std::vector<std::string> names = {"pending\nFORGED: x",
                                            "paid: #comment",
                                            "s\x1b]52;c;aGk=\x07",
                                            "c1\xc2\x9b"
                                            "2J",
                                            "rtl\xe2\x80\xae"
                                            "dap",
                                            "zw\xe2\x80\x8b",
                                            "del\x7f",
                                            "q\"uote\\'",
                                            "- [list]",
                                            "yes",
                                            "caf\xc3\xa9 \xe6\x97\xa5",
                                            "line\r\u2028end"};
    auto seed = parse_allow("a>b", {}, {}); // --learn judges against no real machine
    Checker learner(seed, false);
    struct Step {
        std::string entity, state, operation;
    };
    std::vector<Step> log;
    for (std::size_t i = 0; i + 1 < names.size(); ++i) {
        auto entity = "e" + std::to_string(i);
        log.push_back({entity, names[i], ""});
        log.push_back({entity, names[i + 1], names[(i + 5) % names.size()]});
        if (i % 3 == 0) log.push_back({entity, names[i + 1], ""}); // a repeat with no operation
    }
    auto feed = [&log](Checker& checker) {
        std::uint64_t findings = 0;
        for (const auto& step : log) {
            Event event;
            event.entity = step.entity;
            event.state = step.state;
            event.operation = step.operation;
            event.position = "log:1";
            findings += checker.judge(event).findings.size();
        }
        return findings;
    };
    feed(learner);
    auto yaml = learned_machine_yaml(learner.observed());
    for (char c : yaml) {
        auto byte = static_cast<unsigned char>(c);
        CHECK((byte >= 0x20 || c == '\n'));
        CHECK(byte != 0x7f);
    }
    CHECK(yaml.find("\xe2\x80\xae") == std::string::npos); // bidi escaped, in names and comments
    CHECK(yaml.find("\xc2\x9b") == std::string::npos);
    CHECK(yaml.find("caf\xc3\xa9") != std::string::npos); // other UTF-8 kept
    auto learned = parse_machine_text(yaml, "learned.yaml");
    Checker checker(learned, false);
    CHECK(feed(checker) == 0);
}

TEST_CASE("each transition is counted under the verdict its findings give it") {
    auto machine = orders();
    Checker checker(machine, false);
    Feed feed{checker};
    feed("o1", "pending", "", 1);
    feed("o1", "paid", "confirm", 2);
    feed("o2", "pending", "", 1);
    CHECK(feed("o2", "paid", "hack", 2) == Findings{Finding::illegal}); // the wrong operation
    feed("o3", "pending", "", 1);
    checker.gap("o3", 2, 2);
    CHECK(feed("o3", "shipped", "", 3) == Findings{}); // not judged: the path is unknown
    auto pending_paid = checker.observed().transitions.at({"pending", "paid"});
    CHECK(pending_paid[states::Verdict::allowed] == 1);
    CHECK(pending_paid[states::Verdict::illegal] == 1);
    auto across_gap = checker.observed().transitions.at({"pending", "shipped"});
    CHECK(across_gap[states::Verdict::after_gap] == 1);
    CHECK(across_gap.total() == 1);
    CHECK(checker.counts()[static_cast<std::size_t>(Finding::illegal)] ==
          pending_paid[states::Verdict::illegal]);
}
