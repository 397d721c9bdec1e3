#include "idem/io/block_reader.hpp"
#include "idem/listen/flaky.hpp"
#include "idem/record/envelope_writer.hpp"
#include "idem/record/parser.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace idem;
using namespace idem::listen;

TEST_CASE("flaky decisions are reproducible from the seed and close to the rates") {
    FlakyPlan plan;
    plan.fail_rate = 0.3;
    plan.drop_rate = 0.1;
    plan.fail_status = 503;
    plan.seed = 42;
    int failed = 0;
    int dropped = 0;
    for (std::uint64_t n = 1; n <= 10000; ++n) {
        auto decision = decide(plan, n);
        CHECK(decide(plan, n).kind == decision.kind);
        if (decision.kind == FlakyDecision::Kind::fail) {
            ++failed;
            CHECK(decision.status == 503);
        }
        if (decision.kind == FlakyDecision::Kind::drop) ++dropped;
    }
    CHECK(dropped > 900);
    CHECK(dropped < 1100);
    // A failure is drawn among the requests that were not dropped.
    CHECK(failed > 2500);
    CHECK(failed < 2900);
    FlakyPlan other = plan;
    other.seed = 43;
    int differ = 0;
    for (std::uint64_t n = 1; n <= 100; ++n)
        differ += decide(plan, n).kind != decide(other, n).kind;
    CHECK(differ > 10);
}

TEST_CASE("without flaky rates every request gets the normal answer") {
    FlakyPlan plan;
    plan.answer_status = 202;
    for (std::uint64_t n = 1; n <= 100; ++n) {
        CHECK(decide(plan, n).kind == FlakyDecision::Kind::answer);
        CHECK(decide(plan, n).status == 202);
    }
}

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
        CHECK(envelope.headers[1].value == "caf\xc3\xa9"); // obs-text read as ISO-8859-1
        CHECK(envelope.headers[2].value == "3");
    }
}
