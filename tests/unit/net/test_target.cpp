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

TEST_CASE("a captured path can never move the request to another host") {
    auto target = parse_target("http://127.0.0.1:18181");
    // Paths that start with '/' stay paths, however they look.
    for (const char* path : {"//127.0.0.2:18182/x", "/a@127.0.0.2:18182/x", "/%40127.0.0.2/x",
                             "/..//127.0.0.2/x", "/x?next=http://127.0.0.2/"}) {
        auto url = url_for(target, path);
        CAPTURE(url);
        CHECK(url.starts_with("http://127.0.0.1:18181/"));
    }
    CHECK(url_for(target, "//127.0.0.2:18182/x") == "http://127.0.0.1:18181//127.0.0.2:18182/x");
    // Anything else is refused before a URL is built.
    for (const char* path : {"@127.0.0.2:18182/pwned", ".evil/x", ":18182@127.0.0.2/x",
                             "127.0.0.2:18182", "http://127.0.0.2/x", "/\\127.0.0.2/x",
                             "/a#@127.0.0.2/x", "/h HTTP/1.1\r\nHost: evil", "*"}) {
        CAPTURE(path);
        CHECK(captured_path_problem(path));
        CHECK_THROWS_AS((void)url_for(target, path), UsageError);
    }
    CHECK_FALSE(captured_path_problem(""));
    CHECK_FALSE(captured_path_problem("/hooks?a=1"));
}

TEST_CASE("--to must name a host and a real port") {
    for (const char* url : {"http://127.0.0.1:/h", "http://127.0.0.1:0/h", "http://h:70000",
                            "http://h:-1/", "http://h:80x/"})
        CHECK_THROWS_WITH_AS((void)parse_target(url), doctest::Contains("expected a number from 1"),
                             UsageError);
    CHECK_THROWS_WITH_AS((void)parse_target("http://user@h/"),
                         doctest::Contains("user information"), UsageError);
    CHECK_THROWS_WITH_AS((void)parse_target("ftp://x", "--forward-to"),
                         doctest::Contains("--forward-to: expected an http://"), UsageError);
    auto v6 = parse_target("http://[::1]:8080/in");
    CHECK(v6.origin == "http://[::1]:8080");
    CHECK(url_for(v6, "/x") == "http://[::1]:8080/in");
}

TEST_CASE("hop-by-hop headers are recognised in any case") {
    for (const char* name : {"connection", "Keep-Alive", "TRANSFER-ENCODING", "host", "Expect"})
        CHECK(is_hop_by_hop(name));
    for (const char* name : {"Stripe-Signature", "Content-Type", "Idempotency-Key"})
        CHECK_FALSE(is_hop_by_hop(name));
}
