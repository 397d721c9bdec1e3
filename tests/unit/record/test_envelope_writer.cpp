#include "idem/io/block_reader.hpp"
#include "idem/record/envelope_writer.hpp"
#include "idem/record/parser.hpp"

#include <doctest/doctest.h>
#include <string>
#include <utility>
#include <vector>

using namespace idem;

TEST_CASE("a captured request reads back as the same envelope") {
    std::vector<std::pair<std::string, std::string>> headers = {
        {"X-B", "2"}, {"A", "caf\xe9"}, {"X-B", "3"}};
    std::string binary("\x00\xff\x10", 3);
    for (std::string body : {std::string("{\"id\":\"evt_1\"}\n"), binary}) {
        std::string line;
        record::append_envelope(line, {"cap_1", Timestamp(std::chrono::milliseconds(1500)), "POST",
                                       "/x?a=1", &headers, body, "127.0.0.1:5"});
        line.append(io::k_padding_bytes, ' ');
        record::RecordParser parser;
        REQUIRE_FALSE(
            parser.parse(std::string_view(line).substr(0, line.size() - io::k_padding_bytes)));
        REQUIRE(parser.shape() == record::RecordShape::envelope);
        const auto& envelope = parser.envelope();
        CHECK(envelope.id == "cap_1");
        CHECK(envelope.received_at == "1970-01-01T00:00:01.500Z");
        CHECK(envelope.path == "/x?a=1");
        CHECK(envelope.body == body);
        REQUIRE(envelope.headers.size() == 3);
        // obs-text comes back as the bytes that arrived (its raw copy), not
        // as the ISO-8859-1 reading written for people.
        CHECK(envelope.headers[1].value == "caf\xe9");
        CHECK(envelope.headers[2].value == "3");
    }
}

TEST_CASE("a path or header value that is not UTF-8 keeps its bytes, apart from UTF-8's") {
    std::vector<std::pair<std::string, std::string>> latin1 = {{"X-A", "caf\xe9"}};
    std::vector<std::pair<std::string, std::string>> utf8 = {{"X-A", "caf\xc3\xa9"}};
    std::string latin1_line, utf8_line;
    record::append_envelope(latin1_line,
                            {"c1", Timestamp{}, "POST", "/caf\xe9", &latin1, "{}", ""});
    record::append_envelope(utf8_line,
                            {"c2", Timestamp{}, "POST", "/caf\xc3\xa9", &utf8, "{}", ""});
    // For people: the bytes read as ISO-8859-1 ("café" in UTF-8); for readers: base64.
    CHECK(latin1_line.find("[\"X-A\",\"caf\xc3\xa9\",\"Y2Fm6Q==\"]") != std::string::npos);
    CHECK(latin1_line.find(R"("path_b64":"L2NhZuk=")") != std::string::npos);
    CHECK(utf8_line.find("path_b64") == std::string::npos);
    for (auto* line : {&latin1_line, &utf8_line}) {
        auto size = line->size();
        line->append(io::k_padding_bytes, ' ');
        record::RecordParser parser;
        REQUIRE_FALSE(parser.parse(std::string_view(*line).substr(0, size)));
        const auto& envelope = parser.envelope();
        CHECK(envelope.headers[0].value == (line == &latin1_line ? "caf\xe9" : "caf\xc3\xa9"));
        CHECK(envelope.path == (line == &latin1_line ? "/caf\xe9" : "/caf\xc3\xa9"));
    }
}
