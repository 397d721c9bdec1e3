// W3C Trace Context's traceparent, against the examples and the rules of
// https://www.w3.org/TR/trace-context/ (section 3.2, "traceparent Header").

#include "idem/net/trace_context.hpp"

#include <doctest/doctest.h>
#include <set>

using namespace idem::net;

TEST_CASE("the specification's example parses into its fields") {
    auto parent = parse_traceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    REQUIRE(parent.has_value());
    CHECK(parent->trace_id == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK(parent->parent_id == "00f067aa0ba902b7");
    CHECK(parent->flags == "01");
    CHECK(format_traceparent(parent->trace_id, parent->parent_id, parent->flags) ==
          "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
    CHECK(parse_traceparent(" 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00\t"));
}

TEST_CASE("values the specification says to treat as absent") {
    for (const char* bad : {
             "",
             "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",   // upper case
             "00-00000000000000000000000000000000-00f067aa0ba902b7-01",   // zero trace id
             "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",   // zero parent id
             "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",   // version ff
             "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",    // short trace id
             "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-x", // 00 has no more fields
             "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
             "0g-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
         })
        CHECK_MESSAGE(!parse_traceparent(bad), bad);
}

TEST_CASE("a later version's extra fields are ignored, as a version-00 reader must") {
    auto parent = parse_traceparent(
        "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-what-the-future");
    REQUIRE(parent.has_value());
    CHECK(parent->trace_id == "4bf92f3577b34da6a3ce929d0e0e4736");
    CHECK_FALSE(parse_traceparent("cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x"));
}

TEST_CASE("new ids are lowercase hex of the right length, and differ") {
    std::set<std::string> seen;
    for (int i = 0; i < 100; ++i) {
        auto trace = new_trace_id();
        auto span = new_span_id();
        CHECK(trace.size() == 32);
        CHECK(span.size() == 16);
        CHECK(parse_traceparent(format_traceparent(trace, span, "01")));
        seen.insert(trace);
    }
    CHECK(seen.size() == 100);
}
