// The state machine: the file form (YAML or JSON, the seed's table as
// labelled transitions), the inline form, and errors at their line.

#include "idem/states/machine.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::states;

TEST_CASE("the seed's table: transitions labelled by operation") {
    auto machine = parse_machine_text(R"(states: [pending, paid, closed, cancelled, refunded]
initial: [pending]
final: [closed, cancelled, refunded]
transitions:
  - pending > paid : confirm
  - pending > cancelled : cancel
  - {from: paid, to: refunded, on: refund}
  - paid > closed
)",
                                      "orders.yaml");
    CHECK(machine.allows("pending", "paid", "confirm"));
    CHECK_FALSE(machine.allows("pending", "paid", "cancel"));
    CHECK(machine.allows("paid", "closed", "anything")); // no label: any operation
    CHECK_FALSE(machine.allows("closed", "paid", ""));   // the seed's closed -> modify
    CHECK(machine.is_initial("pending"));
    CHECK(machine.is_final("refunded"));
    CHECK(machine.knows("paid"));
    CHECK_FALSE(machine.knows("modified"));
}

TEST_CASE("an inconsistent machine file is a usage error at its line") {
    auto fails = [](const char* text, const char* words) {
        CHECK_THROWS_WITH_AS((void)parse_machine_text(text, "m.yaml"), doctest::Contains(words),
                             UsageError);
    };
    fails("states: [a, b]\ninitial: [a]\ntransitions:\n  - a > c\n",
          "m.yaml:4:5: a transition names state 'c', which states: does not declare");
    fails("states: [a, b]\ntransitions:\n  - a > b\n", "no initial state");
    fails("states: [a, b]\ninitial: [a]\nfinal: [z]\n", "m.yaml:3:9: final names state 'z'");
    fails("states: [a, a]\ninitial: [a]\n", "declared twice");
    fails("states: [a]\ninitial: [a]\ntransitons: []\n",
          "m.yaml:3:1: unknown machine key 'transitons'");
    fails("states: [a, b]\ninitial: [a]\ntransitions:\n  - a to b\n", "is not FROM > TO");
    fails("initial: [a]\n", "no states:");
}

TEST_CASE("the inline form finds where entities start and end") {
    auto machine = parse_allow("pending>paid,pending>cancelled,paid>refunded", {}, {});
    CHECK(machine.states == std::vector<std::string>{"pending", "paid", "cancelled", "refunded"});
    CHECK(machine.initial == std::set<std::string, std::less<>>{"pending"});
    CHECK(machine.final == std::set<std::string, std::less<>>{"cancelled", "refunded"});
    CHECK(machine.allows("paid", "refunded", ""));
    CHECK_THROWS_WITH_AS((void)parse_allow("a>b,b>a", {}, {}), doctest::Contains("give --initial"),
                         UsageError);
    CHECK(parse_allow("a>b,b>a", {"a"}, {}).is_initial("a"));
    CHECK_THROWS_WITH_AS((void)parse_allow("a>b", {"z"}, {}), doctest::Contains("--initial 'z'"),
                         UsageError);
    CHECK_THROWS_AS((void)parse_allow("a-b", {}, {}), UsageError);
}

TEST_CASE("a learned machine reads back as a machine") {
    Observed observed;
    observed.transitions[{"pending", "paid"}].by_verdict[0] = 5;
    observed.transitions[{"paid", "shipped"}].by_verdict[0] = 4;
    observed.first_states["pending"] = 5;
    observed.last_states["shipped"] = 4;
    observed.last_states["paid"] = 1;
    auto machine = parse_machine_text(learned_machine_yaml(observed), "learned.yaml");
    CHECK(machine.allows("pending", "paid", ""));
    CHECK(machine.is_initial("pending"));
    CHECK(machine.is_final("shipped"));
    CHECK_FALSE(machine.is_final("paid")); // it was left by a transition
}

TEST_CASE("a learned machine keeps each transition's operation") {
    Observed observed;
    observed.transitions[{"pending", "paid"}].by_verdict[0] = 3;
    observed.operations[{"pending", "paid", "confirm"}] = 2;
    observed.transitions[{"paid", "refunded"}].by_verdict[0] = 1;
    observed.operations[{"paid", "refunded", "refund"}] = 1;
    observed.first_states["pending"] = 3;
    observed.last_states["refunded"] = 1;
    auto yaml = learned_machine_yaml(observed);
    CHECK(yaml.find("\"on\": \"confirm\"}  # 2 times") != std::string::npos);
    CHECK(yaml.find("{from: \"pending\", to: \"paid\"}  # 1 time, with no operation") !=
          std::string::npos);
    auto machine = parse_machine_text(yaml, "learned.yaml");
    CHECK(machine.allows("paid", "refunded", "refund"));
    CHECK_FALSE(machine.allows("paid", "refunded", "cancel")); // only the operation seen
    CHECK(machine.allows("pending", "paid", "anything"));      // one event named none
}

TEST_CASE("a spaced arrow is an arrow: 'pending -> paid' is pending to paid") {
    auto machine = parse_machine_text("states: [pending, paid]\ninitial: [pending]\ntransitions:\n"
                                      "  - pending -> paid\n  - paid->pending : undo\n",
                                      "m.yaml");
    CHECK(machine.allows("pending", "paid", ""));
    CHECK(machine.allows("paid", "pending", "undo"));
    CHECK(parse_allow("a -> b", {}, {}).allows("a", "b", ""));
}

TEST_CASE("a key that is no plain name is an error at its place, never an internal error") {
    // Found by fuzz_specs: a list as a key ("? - paid > refunded") made
    // yaml-cpp throw a conversion error that escaped as exit 4.
    std::string_view text = "states: [pending, paid, refunded]\n"
                            "transitions:\n"
                            "  - pending > paid\n"
                            "? - paid > refunded : refund\n";
    CHECK_THROWS_WITH_AS((void)parse_machine_text(text, "m.yaml"), doctest::Contains("m.yaml:4:"),
                         UsageError);
    CHECK_THROWS_WITH_AS((void)parse_machine_text("transitions:\n  - {[a]: b}\n", "m.yaml"),
                         doctest::Contains("m.yaml:2:"), UsageError);
}
