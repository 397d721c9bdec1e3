// Telling an input's format by its first bytes (run/input_format.hpp).

#include "idem/run/input_format.hpp"

#include <doctest/doctest.h>

using namespace idem::run;

TEST_CASE("NDJSON, arrays, pages, HAR and CSV are told apart by their first lines") {
    CHECK(detect_input_format("{\"id\":1}\n{\"id\":2}\n", ',') == InputFormat::ndjson);
    CHECK(detect_input_format("\xEF\xBB\xBF{\"id\":1}", ',') == InputFormat::ndjson);
    CHECK(detect_input_format("  [\n  {\"id\": 1},\n", ',') == InputFormat::json);
    CHECK(detect_input_format("{\n  \"object\": \"list\",\n", ',') == InputFormat::json);
    CHECK(detect_input_format("{\"object\":\"list\",\"data\":[{\"id\":1}]}\n", ',') ==
          InputFormat::json);
    CHECK(detect_input_format("{\n  \"log\": {\n", ',') == InputFormat::har);
    CHECK(detect_input_format("{\"log\":{\"entries\":[]}}", ',') == InputFormat::har);
    CHECK(detect_input_format("id,type\na,x\n", ',') == InputFormat::csv);
    CHECK(detect_input_format("id;type\na;x\n", ';') == InputFormat::csv);
}

TEST_CASE("a one-line page is a page when a list API's members say so") {
    // Svix's "list attempts" answer: a cursor, no "object".
    CHECK(detect_input_format("{\"data\":[{\"id\":1}],\"iterator\":\"i\",\"done\":true}", ',') ==
          InputFormat::json);
    CHECK(detect_input_format("{\"data\":[{\"id\":1}],\"has_more\":false}\n", ',') ==
          InputFormat::json);
}

TEST_CASE("what could be one record is one: a one-line object with a data array, no list") {
    CHECK(detect_input_format("{\"data\":[1,2]}\n", ',') == InputFormat::ndjson);
    CHECK(detect_input_format("", ',') == InputFormat::ndjson);
    CHECK(detect_input_format("hello\n", ',') == InputFormat::ndjson); // rejected line by line
}

TEST_CASE("a log whose first line a rotation cut is NDJSON, commas in that line or not") {
    CHECK(detect_input_format("unt\":10,\"id\":\"x\"}\n{\"id\":\"y\"}\n", ',') ==
          InputFormat::ndjson);
    CHECK(detect_input_format("{\"amount\":10,\"id\n{\"id\":\"y\"}\n", ',') == InputFormat::ndjson);
}

TEST_CASE("broken lines that start like objects are NDJSON to reject, not a document") {
    CHECK(detect_input_format("{\"broken\": 0xxx\n{\"broken\": 1xxx\n", ',') ==
          InputFormat::ndjson);
    CHECK(detect_input_format("{\n  \"data\": [\n", ',') == InputFormat::json);
    CHECK(detect_input_format("{ \"log\": {\n    \"version\": \"1.2\",\n", ',') ==
          InputFormat::har);
}

TEST_CASE("a cut first line with a comma never turns the log into CSV") {
    // The cut line's brace, a blank second line, a second line too long
    // to be seen whole: each is still NDJSON.
    CHECK(detect_input_format("a\",\"b\":1}\n{\"id\":\"y\"}\n", ',') == InputFormat::ndjson);
    CHECK(detect_input_format("amount,id\n\n\n{\"id\":\"y\"}\n", ',') == InputFormat::ndjson);
    std::string long_second = "x\",\"n\":2\n{\"id\":\"" + std::string(k_detect_bytes, 'a');
    CHECK(detect_input_format(long_second, ',') == InputFormat::ndjson);
    std::string long_row = "id,type\n" + std::string(k_detect_bytes, 'a');
    CHECK(detect_input_format(long_row, ',') == InputFormat::ndjson);
    // A CSV is still a CSV: a header, blank lines, then rows; a header alone.
    CHECK(detect_input_format("id,type\n\na,x\n", ',') == InputFormat::csv);
    CHECK(detect_input_format("id,type\n", ',') == InputFormat::csv);
    CHECK(detect_input_format("id,type", ',') == InputFormat::csv);
}
