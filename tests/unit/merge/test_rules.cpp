// merge's rules: the --agg spelling, conditions, and rules files (the
// seed's YAML shape, JSON), with errors that say where.

#include "idem/io/block_reader.hpp"
#include "idem/merge/rules.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::merge;

TEST_CASE("--agg reads OUT=FUNC(FIELD) pieces, concat's separator and the whole event") {
    auto aggregates =
        parse_aggregates("value=avg(value), n=count(),last_ts=max(ts),texts=concat(text,' | '),"
                         "events=append(.),tags=distinct(data.tag)");
    REQUIRE(aggregates.size() == 6);
    CHECK(aggregates[0].output == "value");
    CHECK(aggregates[0].function == Function::avg);
    CHECK(aggregates[0].input->text() == "value");
    CHECK(aggregates[1].function == Function::count);
    CHECK_FALSE(aggregates[1].input);
    CHECK(aggregates[2].function == Function::max);
    CHECK(aggregates[3].separator == " | ");
    CHECK(aggregates[4].whole_event);
    CHECK(aggregates[5].input->text() == "data.tag");
}

TEST_CASE("a wrong --agg piece is a usage error naming it") {
    auto fails = [](const char* spec, const char* words) {
        CHECK_THROWS_WITH_AS((void)parse_aggregates(spec), doctest::Contains(words), UsageError);
    };
    fails("value=average(value)", "unknown function 'average'");
    fails("value=avg", "is not OUTPUT=FUNCTION(FIELD)");
    fails("n=count(x)", "count() takes no field");
    fails("v=avg()", "avg() needs a field");
    fails("v=sum(.)", "the whole event (.) goes with append");
    fails("v=avg(x),v=sum(y)", "'v' is set twice");
    fails("_idem=count()", "is not a field name");
    fails("t=concat(text, |)", "separator is quoted");
    fails("t=first(a,'x')", "only concat");
}

TEST_CASE("conditions: FIELD=VALUE compares the value's text, FIELD alone its presence") {
    std::string line = R"({"priority":"critical","n":3,"flag":false})";
    line.append(io::k_padding_bytes, ' ');
    record::RecordParser parser;
    REQUIRE_FALSE(
        parser.parse(std::string_view(line).substr(0, line.size() - io::k_padding_bytes)));
    CHECK(holds(parser, parse_condition("priority=critical")));
    CHECK_FALSE(holds(parser, parse_condition("priority=low")));
    CHECK(holds(parser, parse_condition("n=3")));
    CHECK(holds(parser, parse_condition("flag")));
    CHECK_FALSE(holds(parser, parse_condition("missing")));
    CHECK_THROWS_AS((void)parse_condition(" "), UsageError);
}

TEST_CASE("the seed's rules file reads as two rules") {
    auto rules = parse_rules_text(R"(message_merger:
  rules:
    - type: notification
      window: 5m
      fields: [user_id, alert_type]
      action: merge_content
    - type: metrics
      window: 1m
      fields: [device_id, metric_name]
      action: average
)",
                                  "merge.yaml");
    REQUIRE(rules.size() == 2);
    CHECK(rules[0].name == "notification");
    CHECK(rules[0].match.at(0).value == "notification");
    CHECK(rules[0].group.size() == 2);
    CHECK(rules[0].window.kind == WindowKind::tumbling);
    CHECK(rules[0].window.size == std::chrono::minutes(5));
    CHECK(rules[0].aggregates.at(0).output == "merged");
    CHECK(rules[0].aggregates.at(0).whole_event);
    CHECK(rules[1].aggregates.at(0).output == "value");
    CHECK(rules[1].aggregates.at(0).function == Function::avg);
    CHECK(rules[1].base == Base::last);
}

TEST_CASE("a rules file in JSON, with every window kind and an explicit aggregate") {
    const char* text = R"json({"rules": [
        {"name": "slide", "match": "kind=m", "group": "d",
         "window": {"kind": "sliding", "size": "10m", "every": "5m"},
         "aggregate": {"total": "sum(v)", "n": "count()"}, "action": "aggregate"},
        {"name": "sessions", "match": {"kind": "s"}, "fields": ["u"], "gap": "30s",
         "max_span": "5m", "max_count": 10, "base": "last"}]})json";
    auto rules = parse_rules_text(text, "merge.json");
    REQUIRE(rules.size() == 2);
    CHECK(rules[0].window.kind == WindowKind::sliding);
    CHECK(rules[0].window.every == std::chrono::minutes(5));
    CHECK(rules[0].aggregates.size() == 3); // total, n, and count added by the action
    CHECK(rules[1].window.kind == WindowKind::session);
    CHECK(rules[1].window.gap == std::chrono::seconds(30));
    CHECK(rules[1].max_count == 10);
    CHECK(rules[1].base == Base::last);
}

TEST_CASE("a rules file that is wrong says where, by line and column") {
    auto fails = [](const char* text, const char* words) {
        CHECK_THROWS_WITH_AS((void)parse_rules_text(text, "merge.yaml"), doctest::Contains(words),
                             UsageError);
    };
    fails("rules:\n  - type: n\n    window: 5m\n    feilds: [a]\n",
          "merge.yaml:4:5: unknown rule key 'feilds'");
    fails("rules:\n  - type: n\n    window: 5 minutes\n    fields: [a]\n",
          "merge.yaml:3:13: window");
    fails("rules:\n  - type: n\n    window: 5m\n", "rule 'n': no group fields");
    fails("rules:\n  - type: n\n    fields: [a]\n", "no window length");
    fails("rules:\n  - type: n\n    window: 5m\n    fields: [a]\n    action: squash\n",
          "merge.yaml:5:13: unknown action 'squash'");
    fails("rules: [\n", "merge.yaml:2:1");
    fails(
        "rules:\n  - {type: a, window: 1m, fields: [x]}\n  - {type: a, window: 1m, fields: [y]}\n",
        "two rules are named 'a'");
    fails("rulez: []\n", "no rules");
    fails("rules:\n  - type: n\n    window: {kind: hopping, size: 5m}\n    fields: [a]\n",
          "window kind 'hopping'");
    fails("rules:\n  - type: n\n    window: 5m\n    every: 10m\n    fields: [a]\n",
          "--every is longer than the window");
}

TEST_CASE("a key given twice in a rules file is refused where it is given again") {
    auto text = "rules:\n  - type: note\n    window: 5m\n    window: 1h\n    fields: [user]\n"
                "    action: merge_content\n";
    CHECK_THROWS_WITH_AS((void)parse_rules_text(text, "r.yaml"),
                         doctest::Contains("r.yaml:4:5: key 'window' is given twice in one mapping "
                                           "(first at 3:5)"),
                         UsageError);
}

TEST_CASE("a rules file whose key is a list or a map is an error at its place") {
    CHECK_THROWS_WITH_AS((void)parse_rules_text("- ? [group]\n  : id\n", "r.yaml"),
                         doctest::Contains("r.yaml:1:"), UsageError);
    CHECK_THROWS_WITH_AS((void)parse_rules_text("{? {a: 1} : b}\n", "r.yaml"),
                         doctest::Contains("r.yaml:1:"), UsageError);
}
