#include "idem/order/order_key.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::order;
using Type = record::FieldValue::Type;

TEST_CASE("sequences are non-negative integers, as numbers or digit strings") {
    CHECK(parse_sequence({Type::number, "42"}) == 42);
    CHECK(parse_sequence({Type::string, "0042"}) == 42);
    CHECK(parse_sequence({Type::number, "9223372036854775806"}) == k_last_sequence);
    // The last one: what would be expected after it is no 64-bit integer.
    CHECK_FALSE(parse_sequence({Type::number, "9223372036854775807"}));
    CHECK_FALSE(parse_sequence({Type::number, "9223372036854775808"}));
    CHECK_FALSE(parse_sequence({Type::number, "-1"}));
    CHECK_FALSE(parse_sequence({Type::number, "1.5"}));
    CHECK_FALSE(parse_sequence({Type::string, ""}));
    CHECK_FALSE(parse_sequence({Type::boolean, "true"}));
}

TEST_CASE("a sequence read from a record: integers at once, the rest as parse_sequence reads it") {
    record::RecordParser parser;
    std::string line = R"({"a":42,"b":"0042","c":-1,"d":1.5,"e":9223372036854775807,)"
                       R"("f":9223372036854775808,"g":true,"h":{"i":[7]},"j":1e2})";
    line.reserve(line.size() + 64); // the padding the line reader guarantees
    REQUIRE_FALSE(parser.parse(line));
    auto read = [&](const char* path, std::optional<record::FieldValue>& found) {
        found.reset();
        return find_sequence(parser, record::FieldPath::parse(path), found);
    };
    std::optional<record::FieldValue> found;
    CHECK(read("a", found) == 42);
    CHECK_FALSE(found); // read as the number, no text written
    CHECK(read("h.i.0", found) == 7);
    CHECK_FALSE(read("e", found)); // 2^63-1: past the last sequence
    REQUIRE(found);
    CHECK(found->text == "9223372036854775807");
    CHECK(read("b", found) == 42); // digits in a string
    REQUIRE(found);
    CHECK(found->type == Type::string);
    CHECK(read("j", found) == 100); // 1e2 is the canonical number 100
    CHECK_FALSE(read("c", found));
    REQUIRE(found);
    CHECK(found->text == "-1"); // what the error message shows
    CHECK_FALSE(read("d", found));
    CHECK_FALSE(read("f", found));
    CHECK_FALSE(read("g", found));
    CHECK_FALSE(read("missing", found));
    CHECK_FALSE(found);
}

TEST_CASE("stamps: RFC 3339, epoch numbers, and hybrid logical clocks") {
    auto rfc = parse_stamp({Type::string, "2026-11-30T08:00:00.5Z"});
    REQUIRE(rfc);
    CHECK(rfc->primary == 1'796'025'600'500'000);
    CHECK(rfc->secondary == 0);
    auto epoch = parse_stamp({Type::number, "1796025600"});
    REQUIRE(epoch);
    CHECK(epoch->primary == 1'796'025'600'000'000);
    // <epoch milliseconds>.<logical counter>: 12 digits or more before the dot.
    auto hlc = parse_stamp({Type::string, "1796025600123.17"});
    REQUIRE(hlc);
    CHECK(hlc->primary == 1'796'025'600'123'000);
    CHECK(hlc->secondary == 17);
    CHECK(*parse_stamp({Type::string, "1796025600123.2"}) <
          *parse_stamp({Type::string, "1796025600123.10"}));
    // Ten digits before the dot: epoch seconds with a fraction, not a clock.
    auto fraction = parse_stamp({Type::number, "1796025600.25"});
    REQUIRE(fraction);
    CHECK(fraction->primary == 1'796'025'600'250'000);
    CHECK(fraction->secondary == 0);
    CHECK_FALSE(parse_stamp({Type::string, "yesterday"}));
    CHECK_FALSE(parse_stamp({Type::null, "null"}));
}

TEST_CASE("partition labels are the values as JSON") {
    CHECK(partition_label("", 0) == "null");
    CHECK(partition_label("s4:ac\"e", 1) == R"("ac\"e")");
    CHECK(partition_label("s4:acme d2:17", 2) == R"(["acme",17])");
    CHECK(partition_label("s3:a b n4:null", 2) == R"(["a b",null])");
}
