#include "idem/audit/differences.hpp"

#include <doctest/doctest.h>

using namespace idem::audit;
using nlohmann::json;

TEST_CASE("differences name each field that differs, by path, in path order") {
    auto before =
        json::parse(R"({"id":"evt_1","request":{"id":"req_1"},"items":[1,2],"gone":true})");
    auto after = json::parse(R"({"id":"evt_1","request":{"id":"req_2"},"items":[1,3],"new":null})");
    auto found = differences(before, after);
    REQUIRE(found.size() == 4);
    CHECK(found[0].path == "gone");
    CHECK(found[0].after == std::nullopt);
    CHECK(found[1].path == "items[1]");
    CHECK(found[2].path == "new");
    CHECK(found[2].before == std::nullopt);
    CHECK(*found[2].after == "null");
    CHECK(describe_difference(found[3]) == R"(request.id: "req_1" -> "req_2")");
    CHECK(describe_difference(found[0]) == "gone: true -> (absent)");
}

TEST_CASE("arrays of other lengths, and values of other types, differ as one value") {
    auto found = differences(json::parse(R"({"a":[1,2]})"), json::parse(R"({"a":[1,2,3]})"));
    REQUIRE(found.size() == 1);
    CHECK(found[0].path == "a");
    CHECK(differences(json::parse("1"), json::parse(R"("1")")).front().path == "(the payload)");
    CHECK(differences(json::parse(R"({"a":{"b":1}})"), json::parse(R"({"a":{"b":1}})")).empty());
}

TEST_CASE("a long value is cut on a character boundary") {
    auto long_text =
        json(std::string(30, 'x') + "\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9");
    auto text = describe_difference({"a", long_text.dump(), std::nullopt});
    CHECK(text.find("(absent)") != std::string::npos);
    CHECK(text.size() < 70);
}
