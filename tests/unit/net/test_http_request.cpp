#include "idem/net/http_request.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace idem::net;

TEST_CASE("a request head keeps headers in arrival order, repeats included") {
    std::string bytes = "POST /hooks/x?a=1 HTTP/1.1\r\nHost: h\r\nX-B: 2\r\nA-First:  1 \r\n"
                        "x-b: 3\r\nContent-Length: 5\r\n\r\nhello";
    auto parsed = parse_request_head(bytes, 65536);
    REQUIRE(parsed.status == HeadParse::Status::complete);
    CHECK(parsed.head.method == "POST");
    CHECK(parsed.head.target == "/hooks/x?a=1");
    REQUIRE(parsed.head.headers.size() == 5);
    CHECK(parsed.head.headers[1] == std::pair<std::string, std::string>{"X-B", "2"});
    CHECK(parsed.head.headers[2] == std::pair<std::string, std::string>{"A-First", "1"});
    CHECK(parsed.head.headers[3] == std::pair<std::string, std::string>{"x-b", "3"});
    CHECK(parsed.head.header("X-b") == "2");
    CHECK(parsed.framing == BodyFraming::length);
    CHECK(parsed.content_length == 5);
    CHECK(parsed.keep_alive);
    CHECK(bytes.substr(parsed.head_bytes) == "hello");
}

TEST_CASE("a head that has not fully arrived asks for more, at every cut") {
    std::string bytes = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
    for (std::size_t cut = 0; cut < bytes.size(); ++cut)
        CHECK(parse_request_head(bytes.substr(0, cut), 65536).status ==
              HeadParse::Status::incomplete);
    CHECK(parse_request_head(bytes, 65536).status == HeadParse::Status::complete);
}

TEST_CASE("bare LF line ends and leading empty lines are accepted") {
    auto parsed = parse_request_head("\r\n\nGET /a HTTP/1.0\nConnection: keep-alive\n\n", 1024);
    REQUIRE(parsed.status == HeadParse::Status::complete);
    CHECK(parsed.head.minor_version == 0);
    CHECK(parsed.keep_alive);
    CHECK(parse_request_head("GET /a HTTP/1.0\r\n\r\n", 1024).keep_alive == false);
    CHECK(parse_request_head("GET /a HTTP/1.1\r\nConnection: close\r\n\r\n", 1024).keep_alive ==
          false);
}

TEST_CASE("malformed heads are refused with the status to answer and why") {
    struct Case {
        const char* bytes;
        int status;
        const char* message;
    };
    const Case cases[] = {
        {"GET /\r\n\r\n", 400, "malformed request line"},
        {"G(T / HTTP/1.1\r\n\r\n", 400, "malformed method"},
        {"GET / HTTP/2.0\r\n\r\n", 505, "unsupported protocol"},
        {"GET / HTTP/1.1\r\nNo colon here\r\n\r\n", 400, "header line without ':'"},
        {"GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "malformed header name"},
        {"GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", 400, "folding"},
        {"GET / HTTP/1.1\r\nA: x\001y\r\n\r\n", 400, "control byte"},
        {"POST / HTTP/1.1\r\nContent-Length: 12x\r\n\r\n", 400, "malformed Content-Length"},
        {"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", 400, "conflicting"},
        {"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
         "smuggling"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "only chunked"},
        // RFC 9112 sections 3.2 and 6.1: a host or a body framing given twice is refused.
        {"POST / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host"},
        {"POST / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400, "more than one Host"},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
         "more than one Transfer-Encoding"},
    };
    for (const auto& test : cases) {
        CAPTURE(test.bytes);
        auto parsed = parse_request_head(test.bytes, 1024);
        CHECK(parsed.status == HeadParse::Status::bad);
        CHECK(parsed.error_status == test.status);
        CHECK(parsed.error.find(test.message) != std::string::npos);
    }
}

TEST_CASE("a head larger than the limit is refused with 431 before it completes") {
    std::string bytes = "GET / HTTP/1.1\r\n";
    bytes += "X-Long: " + std::string(2000, 'a') + "\r\n";
    auto parsed = parse_request_head(bytes, 1024);
    CHECK(parsed.status == HeadParse::Status::bad);
    CHECK(parsed.error_status == 431);
    CHECK(parse_request_head("GET /" + std::string(2000, 'a'), 1024).error_status == 431);
}

TEST_CASE("Expect: 100-continue and chunked framing are recognised") {
    auto parsed = parse_request_head(
        "POST / HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n", 1024);
    REQUIRE(parsed.status == HeadParse::Status::complete);
    CHECK(parsed.expects_continue);
    CHECK(parsed.framing == BodyFraming::chunked);
}

TEST_CASE("a chunked body decodes across arbitrary cuts") {
    std::string wire = "5;ext=1\r\nhello\r\n7\r\n, world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
    for (std::size_t cut = 0; cut <= wire.size(); ++cut) {
        CAPTURE(cut);
        ChunkedDecoder decoder(1024);
        std::string body;
        std::string pending = wire.substr(0, cut);
        auto step = decoder.feed(pending, body);
        pending.erase(0, step.consumed);
        pending += wire.substr(cut);
        if (step.status != ChunkedDecoder::Status::done) {
            step = decoder.feed(pending, body);
            pending.erase(0, step.consumed);
        }
        CHECK(step.status == ChunkedDecoder::Status::done);
        CHECK(body == "hello, world");
        CHECK(pending == "NEXT");
    }
}

TEST_CASE("a chunked body beyond the limit, or malformed, stops decoding") {
    ChunkedDecoder small(8);
    std::string body;
    CHECK(small.feed("5\r\nhello\r\n5\r\nworld\r\n", body).status ==
          ChunkedDecoder::Status::too_large);
    ChunkedDecoder huge(1024);
    CHECK(huge.feed("ffffffffffffffffff\r\n", body).status == ChunkedDecoder::Status::bad);
    ChunkedDecoder overlong(1024);
    CHECK(overlong.feed("3\r\nabcd\r\n", body).status == ChunkedDecoder::Status::bad);
    ChunkedDecoder endless(1024);
    CHECK(endless.feed(std::string(5000, '1'), body).status == ChunkedDecoder::Status::bad);
}

TEST_CASE("a request built from a crafted record is refused before it reaches the wire") {
    HeaderPairs fine = {{"Content-Type", "application/json"}, {"X-Tab", "a\tb"}};
    CHECK_FALSE(request_problem("POST", "http://h/x?a=1", fine));
    CHECK(request_problem("POST /x HTTP/1.1\r\nX: y", "http://h/", fine)->find("method") !=
          std::string::npos);
    CHECK(request_problem("POST", "http://h/x y", fine)->find("URL") != std::string::npos);
    CHECK(request_problem("POST", "http://h/", {{"X-A", "1\r\nX-Injected: 2"}})
              ->find("control byte") != std::string::npos);
    CHECK(request_problem("POST", "http://h/", {{"Bad Name", "1"}})->find("header name") !=
          std::string::npos);
}

TEST_CASE("request targets: origin-form, OPTIONS *, and the path of an absolute-form") {
    auto target_of = [](std::string_view line) {
        auto parsed = parse_request_head(std::string(line) + "\r\nHost: h\r\n\r\n", 65536);
        return parsed.status == HeadParse::Status::complete ? parsed.head.target
                                                            : "refused " + parsed.error;
    };
    CHECK(target_of("POST /hooks?a=1 HTTP/1.1") == "/hooks?a=1");
    CHECK(target_of("POST //127.0.0.2/x HTTP/1.1") == "//127.0.0.2/x");
    CHECK(target_of("POST http://127.0.0.2:18182/pwned?q HTTP/1.1") == "/pwned?q");
    CHECK(target_of("POST HTTPS://evil HTTP/1.1") == "/");
    CHECK(target_of("OPTIONS * HTTP/1.1") == "*");
    for (const char* line :
         {"POST @127.0.0.2:18182/pwned HTTP/1.1", "POST .evil/x HTTP/1.1",
          "POST :1@127.0.0.2/x HTTP/1.1", "POST * HTTP/1.1", "POST /\\evil/x HTTP/1.1",
          "POST /a#@evil HTTP/1.1", "CONNECT 127.0.0.2:443 HTTP/1.1", "POST http:///x HTTP/1.1"}) {
        CAPTURE(line);
        CHECK(target_of(line).starts_with("refused request target"));
    }
}

TEST_CASE("the head scanner looks at each byte once, however the head is cut") {
    const std::string head = "\r\nPOST /x HTTP/1.1\r\nA: 1\r\nB: 2\r\n\r\nbody";
    const auto head_size = head.find("body");
    for (std::size_t step = 1; step <= 7; ++step) {
        HeadScanner scanner;
        std::optional<std::size_t> end;
        std::string buffer;
        for (std::size_t at = 0; at < head.size() && !end; at += step) {
            buffer += head.substr(at, step);
            end = scanner.scan(buffer);
        }
        CAPTURE(step);
        REQUIRE(end);
        CHECK(*end == head_size);
    }
    HeadScanner bare_lf;
    CHECK(bare_lf.scan("GET / HTTP/1.1\nA: 1\n\n") == std::optional<std::size_t>(21));
    HeadScanner split_crlf;
    CHECK_FALSE(split_crlf.scan("GET / HTTP/1.1\r"));
    CHECK_FALSE(split_crlf.scan("GET / HTTP/1.1\r\nA: 1\r"));
    CHECK(split_crlf.scan("GET / HTTP/1.1\r\nA: 1\r\n\r\n") == std::optional<std::size_t>(24));
}

TEST_CASE("what a gateway passes on from an upstream") {
    CHECK(is_final_status(200));
    CHECK(is_final_status(599));
    CHECK_FALSE(is_final_status(101));
    CHECK_FALSE(is_final_status(999));
    CHECK_FALSE(is_final_status(0));
    CHECK(is_retry_after_value("5"));
    CHECK(is_retry_after_value("Wed, 21 Oct 2015 07:28:00 GMT"));
    CHECK_FALSE(is_retry_after_value("5\rSet-Cookie: injected=1"));
    CHECK_FALSE(is_retry_after_value("5\nX: y"));
    CHECK_FALSE(is_retry_after_value(""));
    CHECK_FALSE(is_writable_header("X-A", std::string("a\0b", 3)));
    CHECK_FALSE(is_writable_header("X A", "b"));
    CHECK(is_writable_header("Retry-After", "5"));
}
