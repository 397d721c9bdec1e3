#include "idem/net/target.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::net;

TEST_CASE("--to splits into origin, path and query") {
    auto bare = parse_target("http://127.0.0.1:8080");
    CHECK(bare.origin == "http://127.0.0.1:8080");
    CHECK(bare.path.empty());
    CHECK(parse_target("https://h/").path.empty());
    auto full = parse_target("https://api.example.com/hooks/in?token=1");
    CHECK(full.origin == "https://api.example.com");
    CHECK(full.path == "/hooks/in");
    CHECK(full.query == "?token=1");
    CHECK_THROWS_WITH_AS((void)parse_target("ftp://x"), doctest::Contains("http:// or https://"),
                         UsageError);
    CHECK_THROWS_WITH_AS((void)parse_target("http:///x"), doctest::Contains("names no host"),
                         UsageError);
}

TEST_CASE("the captured path is kept unless --to names one") {
    CHECK(url_for(parse_target("http://h:1"), "/orig?a=1") == "http://h:1/orig?a=1");
    CHECK(url_for(parse_target("http://h:1"), "") == "http://h:1/");
    CHECK(url_for(parse_target("http://h:1/new"), "/orig?a=1") == "http://h:1/new?a=1");
    CHECK(url_for(parse_target("http://h:1/new?b=2"), "/orig?a=1") == "http://h:1/new?b=2");
}

TEST_CASE("hop-by-hop headers are recognised in any case") {
    for (const char* name : {"connection", "Keep-Alive", "TRANSFER-ENCODING", "host", "Expect"})
        CHECK(is_hop_by_hop(name));
    for (const char* name : {"Stripe-Signature", "Content-Type", "Idempotency-Key"})
        CHECK_FALSE(is_hop_by_hop(name));
}
