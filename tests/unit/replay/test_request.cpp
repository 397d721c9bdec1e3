#include "idem/io/block_reader.hpp"
#include "idem/replay/request.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace idem;
using namespace idem::replay;

namespace {

// A parser holding `line` (kept alive with its padding by the caller).
struct Parsed {
    std::string line;
    record::RecordParser parser;
    explicit Parsed(std::string text) : line(std::move(text)) {
        auto size = line.size();
        line.append(io::k_padding_bytes, ' ');
        REQUIRE_FALSE(parser.parse(std::string_view(line).substr(0, size)));
        line.resize(size);
    }
};

} // namespace

TEST_CASE("an envelope's request drops hop-by-hop headers and carries the key once") {
    Parsed envelope(R"({"idem":1,"method":"PATCH","path":"/p","headers":[["Host","x"],)"
                    R"(["Connection","keep-alive, X-Private"],["X-Private","1"],["X-A","a"],)"
                    R"(["idempotency-key","old"],["Content-Length","2"]],"body":"{}"})");
    auto request = build_request(envelope.parser, envelope.line, net::parse_target("http://t"),
                                 "Idempotency-Key", "k1");
    CHECK(request.method == "PATCH");
    CHECK(request.url == "http://t/p");
    CHECK(request.body == "{}");
    CHECK(request.headers == net::HeaderPairs{{"X-A", "a"}, {"Idempotency-Key", "k1"}});
}

TEST_CASE("a plain event is POSTed as its exact bytes") {
    Parsed event(R"({ "id" : "evt_1" })");
    auto request = build_request(event.parser, event.line, net::parse_target("http://t/in"),
                                 "Idempotency-Key", "evt_1");
    CHECK(request.method == "POST");
    CHECK(request.url == "http://t/in");
    CHECK(request.body == R"({ "id" : "evt_1" })");
    CHECK(request.headers ==
          net::HeaderPairs{{"Content-Type", "application/json"}, {"Idempotency-Key", "evt_1"}});
}

TEST_CASE("keys: a readable id when there is one, a fingerprint otherwise") {
    Parsed event(R"({"id":"evt_1","n":7,"o":{"a":1},"s":"has space"})");
    auto key_of = [&](const char* paths) {
        KeyMaker maker(paths[0] ? record::FieldPath::parse_list(paths)
                                : std::vector<record::FieldPath>{});
        return maker.key_for(event.parser, event.line);
    };
    CHECK(key_of("id").key == "evt_1");
    CHECK(key_of("n").key == "7");
    auto object_key = key_of("o").key;
    REQUIRE(object_key);
    CHECK(object_key->starts_with("idem-"));
    CHECK(object_key->size() == 5 + 32);
    CHECK(key_of("s").key->starts_with("idem-"));
    CHECK(key_of("id,n").key != key_of("n,id").key);
    CHECK(key_of("").key == key_of("").key);
    auto missing = key_of("missing");
    CHECK_FALSE(missing.key);
    CHECK(missing.missing_path == "missing");
    // The same event spelled differently has the same whole-event key.
    Parsed respelled(R"({"s":"has space","o":{"a":1.0},"n":7,"id":"evt_1"})");
    KeyMaker whole({});
    CHECK(whole.key_for(respelled.parser, respelled.line).key == key_of("").key);
}
