// A JSON array or page read element by element (run/json_elements.hpp).

#include "idem/run/json_elements.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace idem;

namespace {

// Every element of `document`, fed `step` bytes at a time.
std::string lines_of(std::string_view document, std::size_t step = 1,
                     std::uint64_t max_bytes = 1 << 20) {
    run::JsonElements elements("doc.json", max_bytes, nullptr);
    std::string lines;
    for (std::size_t at = 0; at < document.size();) {
        auto chunk = document.substr(at, step);
        auto fed = elements.feed(chunk, lines);
        at += fed.consumed;
    }
    elements.finish();
    return lines;
}

struct CollectedOversize final : io::OversizeHandler {
    std::string bytes;
    int ended = 0;
    void begin(std::string_view) override {}
    void chunk(std::string_view more) override { bytes.append(more); }
    void end() override { ++ended; }
};

} // namespace

TEST_CASE("an array's elements are its lines, whatever the bytes arrive in") {
    std::string_view document =
        "\xef\xbb\xbf [\n  {\"id\": \"a\",\n   \"n\": [1, {\"x\": \"]}\\\"\"}]},\n"
        "  {\"id\":\"b\"}, 7, \"s,]\", true , null\n]\n";
    std::string expected =
        "{\"id\": \"a\",    \"n\": [1, {\"x\": \"]}\\\"\"}]}\n{\"id\":\"b\"}\n7\n"
        "\"s,]\"\ntrue\nnull\n";
    for (std::size_t step : {1UL, 3UL, 7UL, 4096UL})
        CHECK(lines_of(document, step) == expected);
    CHECK(lines_of("[]") == "");
}

TEST_CASE("a page's data array is read; its other members are passed over") {
    std::string_view page =
        "{\"object\": \"list\", \"url\": \"/v1/events\", \"meta\": {\"data\": [0]},\n"
        " \"data\": [{\"id\": 1}, {\"id\": 2}],\n \"has_more\": false}";
    for (std::size_t step : {1UL, 5UL, 4096UL})
        CHECK(lines_of(page, step) == "{\"id\": 1}\n{\"id\": 2}\n");
}

TEST_CASE("what is no array of records is an error with its position") {
    CHECK_THROWS_WITH_AS(lines_of("{\"object\": \"list\"}"), doctest::Contains("\"data\" array"),
                         InputError);
    CHECK_THROWS_WITH_AS(lines_of("{\"data\": 5}"), doctest::Contains("not an array"), InputError);
    CHECK_THROWS_WITH_AS(lines_of("[{\"id\": 1},\n ]"), doctest::Contains("doc.json:2:2"),
                         InputError);
    CHECK_THROWS_WITH_AS(lines_of("[{\"id\": 1} {\"id\": 2}]"), doctest::Contains("',' or ']'"),
                         InputError);
    CHECK_THROWS_WITH_AS(lines_of("[{\"id\": 1}"), doctest::Contains("cut short"), InputError);
    CHECK_THROWS_WITH_AS(lines_of("[1] [2]"), doctest::Contains("more after"), InputError);
    CHECK_THROWS_WITH_AS(lines_of(""), doctest::Contains("empty"), InputError);
}

TEST_CASE("nesting deeper than the bound is an error at its position, never a crash") {
    std::string deep(100000, '[');
    CHECK_THROWS_WITH_AS(lines_of(deep, 4096), doctest::Contains("doc.json:1:1024"), InputError);
    std::string page = "{\"data\": " + std::string(100000, '[');
    CHECK_THROWS_WITH_AS(lines_of(page, 4096), doctest::Contains("nested deeper"), InputError);
    // As deep as allowed is an element like any other (the parser judges it).
    std::string allowed = "[" + std::string(1022, '[') + std::string(1022, ']') + "]";
    CHECK(lines_of(allowed, 4096).size() == 2045);
}

TEST_CASE("an element past the limit goes to the oversize handler and ends the feed") {
    CollectedOversize oversize;
    run::JsonElements elements("doc.json", 10, &oversize);
    std::string lines;
    std::string_view document = "[{\"id\":1},{\"pad\":\"0123456789\"},{\"id\":3}]";
    auto fed = elements.feed(document, lines);
    CHECK(lines == "{\"id\":1}\n");
    CHECK(fed.oversized_bytes == 20);
    CHECK(oversize.bytes == "{\"pad\":\"0123456789\"}");
    CHECK(oversize.ended == 1);
    lines.clear();
    fed = elements.feed(document.substr(fed.consumed), lines);
    CHECK(fed.oversized_bytes == 0);
    CHECK(lines == "{\"id\":3}\n");
    elements.finish();
    CHECK(elements.elements() == 3);
}
