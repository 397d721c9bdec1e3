// The census of the paths and values a run was given: a path no record
// holds, or a value none holds at a path they do hold, is named with the
// closest one records held.

#include "idem/io/block_reader.hpp"
#include "idem/record/parser.hpp"
#include "idem/record/path_census.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::record;

namespace {

void feed(PathCensus& census, const std::vector<std::string>& lines) {
    RecordParser parser;
    parser.report_paths_to(&census);
    for (auto line : lines) {
        auto size = line.size();
        line.append(io::k_padding_bytes, ' ');
        REQUIRE_FALSE(parser.parse(std::string_view(line).substr(0, size)));
    }
}

struct Collect final : io::Diagnostics {
    std::vector<std::string> warnings;
    void warning(const SourcePosition&, std::string_view message) override {
        warnings.emplace_back(message);
    }
};

const std::vector<std::string> k_stripe = {
    R"({"id":"evt_1","type":"charge.succeeded","request":{"id":"req_1"},"delivery_attempt":1})",
    R"({"id":"evt_1","type":"charge.succeeded","request":{"id":"req_2"},"delivery_attempt":2})",
    R"({"id":"evt_2","type":"invoice.paid","request":{"id":"req_3"}})"};

} // namespace

TEST_CASE("a path no record holds is named with the closest path records held") {
    PathCensus census;
    census.expect_path("--ignore", FieldPath::parse("request.idd"), PathCensus::Scope::event);
    census.expect_path("--ignore", FieldPath::parse("delivery_attempt"));
    census.expect_path("--key", FieldPath::parse("id"));
    feed(census, k_stripe);
    auto verdict = census.verdict();
    CHECK(verdict.records == 3);
    REQUIRE(verdict.absent.size() == 1); // delivery_attempt is in two of three: present
    CHECK(verdict.absent[0].flag == "--ignore");
    CHECK(verdict.absent[0].path == "request.idd");
    CHECK(verdict.absent[0].closest == "request.id");
    CHECK(verdict.unmatched.empty());

    Collect diagnostics;
    io::Summary summary;
    census.report(diagnostics, summary);
    REQUIRE(diagnostics.warnings.size() == 1);
    CHECK(diagnostics.warnings[0] ==
          "--ignore: 'request.idd' is in none of 3 records; did you mean 'request.id'? "
          "(--allow-absent request.idd if it may be)");
    CHECK(summary.count("absent_paths") == 1);
}

TEST_CASE("a value no record holds at a path they hold is unmatched, with the values seen") {
    PathCensus census;
    census.expect_value("--bypass", FieldPath::parse("type"), "charge.succeded");
    census.expect_value("--filter", FieldPath::parse("type"), "invoice.paid");
    census.expect_value("--bypass", FieldPath::parse("priorty"), "critical");
    feed(census, k_stripe);
    auto verdict = census.verdict();
    REQUIRE(verdict.unmatched.size() == 1);
    CHECK(verdict.unmatched[0].value == "charge.succeded");
    CHECK(verdict.unmatched[0].closest == "charge.succeeded");
    CHECK(verdict.unmatched[0].seen.size() == 2);
    REQUIRE(verdict.absent.size() == 1); // a value's path that no record holds is a typo too
    CHECK(verdict.absent[0].path == "priorty");

    Collect diagnostics;
    io::Summary summary;
    census.report(diagnostics, summary);
    CHECK(summary.count("unmatched_values") == 1);
    CHECK(diagnostics.warnings.back().find("did you mean 'charge.succeeded'?") !=
          std::string::npos);
}

TEST_CASE("--allow-absent, no records, and an envelope's body") {
    SUBCASE("a path allowed absent is no miss") {
        PathCensus census({FieldPath::parse("request.idd")});
        census.expect_path("--ignore", FieldPath::parse("request.idd"));
        feed(census, k_stripe);
        CHECK(census.verdict().absent.empty());
    }
    SUBCASE("no record read: nothing judged, nothing reported") {
        PathCensus census;
        census.expect_path("--key", FieldPath::parse("id"));
        Collect diagnostics;
        io::Summary summary;
        census.report(diagnostics, summary);
        CHECK(diagnostics.warnings.empty());
        CHECK(summary.counts.empty());
    }
    SUBCASE("--ignore's paths are looked for in an envelope's body too") {
        PathCensus census;
        census.expect_path("--ignore", FieldPath::parse("request.id"), PathCensus::Scope::event);
        census.expect_path("--key", FieldPath::parse("request")); // the envelope's own field
        feed(census, {R"({"idem":1,"id":"c1","received_at":"2026-11-30T08:00:00Z","method":"POST",)"
                      R"("path":"/h","headers":[],"body":"{\"request\":{\"id\":\"r1\"}}"})"});
        auto verdict = census.verdict();
        REQUIRE(verdict.absent.size() == 1);
        CHECK(verdict.absent[0].flag == "--key");
    }
}
