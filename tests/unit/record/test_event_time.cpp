// The one event-time rule every subcommand applies (record/event_time.hpp).

#include "idem/io/block_reader.hpp"
#include "idem/record/event_time.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::record;

namespace {

EventTime time_of(const std::string& json, const char* time_field) {
    static std::string line; // the parser's values point into it
    line = json;
    line.reserve(line.size() + io::k_padding_bytes);
    static RecordParser parser;
    REQUIRE_FALSE(parser.parse(line));
    if (!time_field) return event_time(parser, nullptr);
    auto path = FieldPath::parse(time_field);
    return event_time(parser, &path);
}

} // namespace

TEST_CASE("a time field holds an RFC 3339 string or an epoch number, as a string or a number") {
    auto rfc = time_of(R"({"ts":"2026-11-30T08:00:00Z"})", "ts");
    CHECK(rfc.status == EventTime::Status::found);
    CHECK(rfc.time == test::instant("2026-11-30T08:00:00Z"));
    CHECK(time_of(R"({"ts":1764489600})", "ts").time == test::instant("2025-11-30T08:00:00Z"));
    CHECK(time_of(R"({"ts":1764489600000})", "ts").time == test::instant("2025-11-30T08:00:00Z"));
    CHECK(time_of(R"({"ts":"1764489600"})", "ts").time == test::instant("2025-11-30T08:00:00Z"));
    CHECK(time_of(R"({"a":{"ts":"2026-11-30T08:00:00+01:00"}})", "a.ts").time ==
          test::instant("2026-11-30T07:00:00Z"));
}

TEST_CASE("a missing or malformed time field fails, worded the same for every subcommand") {
    auto missing = time_of(R"({"id":1})", "ts");
    CHECK(missing.failed());
    CHECK(missing.status == EventTime::Status::missing);
    CHECK(describe_failure(missing, FieldPath::parse("ts")) == "missing time field 'ts'");
    for (const char* json : {R"({"ts":"yesterday"})", R"({"ts":true})", R"({"ts":null})",
                             R"({"ts":{"at":1}})", R"({"ts":[1764489600]})"}) {
        auto malformed = time_of(json, "ts");
        CHECK_MESSAGE(malformed.status == EventTime::Status::malformed, json);
        CHECK(malformed.failed());
        CHECK_FALSE(malformed.time);
        CHECK(describe_failure(malformed, FieldPath::parse("ts")) ==
              "time field 'ts' is not a timestamp (RFC 3339, or an epoch number)");
    }
}

TEST_CASE(
    "without a time field, an envelope's received_at is its time and a plain event has none") {
    auto envelope = time_of(
        R"({"idem":1,"id":"d1","received_at":"2026-11-30T08:00:01Z","method":"POST","path":"/",)"
        R"("headers":[],"body":"{}"})",
        nullptr);
    CHECK(envelope.status == EventTime::Status::found);
    CHECK(envelope.time == test::instant("2026-11-30T08:00:01Z"));
    auto plain = time_of(R"({"id":1,"ts":"2026-11-30T08:00:00Z"})", nullptr);
    CHECK(plain.status == EventTime::Status::none);
    CHECK_FALSE(plain.failed());
    CHECK_FALSE(plain.time);
}

TEST_CASE("--since/--until hold [since, until): the first instant in, the last out") {
    record::TimeWindow window{test::instant("2026-11-30T05:00:00Z"),
                              test::instant("2026-11-30T09:30:00Z")};
    auto placed = [&](const char* text) {
        record::EventTime time;
        time.status = record::EventTime::Status::found;
        time.time = test::instant(text);
        return record::place(window, time);
    };
    CHECK(placed("2026-11-30T05:00:00Z") == record::Placement::inside);
    CHECK(placed("2026-11-30T09:29:59.999Z") == record::Placement::inside);
    CHECK(placed("2026-11-30T09:30:00Z") == record::Placement::outside);
    CHECK(placed("2026-11-30T04:59:59Z") == record::Placement::outside);
    CHECK(record::place(window, record::EventTime{}) == record::Placement::untimed);
    CHECK(record::place(record::TimeWindow{}, record::EventTime{}) == record::Placement::inside);
}
