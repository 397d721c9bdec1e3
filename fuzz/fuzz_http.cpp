// Fuzz target: untrusted bytes as an HTTP/1.1 request stream, through the
// head parser and, when the head asks for it, the chunked body decoder;
// then the envelope writer that captures what was parsed.

#include "idem/net/http_request.hpp"
#include "idem/record/envelope_writer.hpp"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    std::string_view bytes(reinterpret_cast<const char*>(data), size);
    // The scanner, fed the bytes in three pieces, must find the head's end
    // where the parser does (the server parses only once it has).
    idem::net::HeadScanner scanner;
    std::optional<std::size_t> head_end;
    for (std::size_t cut : {size / 3, 2 * size / 3, size})
        if (!head_end) head_end = scanner.scan(bytes.substr(0, cut));
    auto parsed = idem::net::parse_request_head(bytes, 4096);
    if (parsed.status == idem::net::HeadParse::Status::complete && !head_end) __builtin_trap();
    if (parsed.status != idem::net::HeadParse::Status::complete) return 0;
    std::string body;
    auto rest = bytes.substr(parsed.head_bytes);
    if (parsed.framing == idem::net::BodyFraming::chunked) {
        idem::net::ChunkedDecoder decoder(1 << 16);
        // Fed in two pieces, as bytes arrive from a socket.
        auto half = rest.size() / 2;
        std::string pending(rest.substr(0, half));
        auto step = decoder.feed(pending, body);
        pending.erase(0, step.consumed);
        pending += rest.substr(half);
        if (step.status == idem::net::ChunkedDecoder::Status::more)
            (void)decoder.feed(pending, body);
    } else {
        body = rest.substr(0, std::min<std::size_t>(rest.size(), parsed.content_length));
    }
    std::string line;
    idem::record::append_envelope(line, {"cap", idem::Timestamp{}, parsed.head.method,
                                         parsed.head.target, &parsed.head.headers, body, ""});
    return 0;
}
