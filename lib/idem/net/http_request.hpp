#pragma once
// HTTP/1.1 request framing (RFC 9112) for `idem listen`. The head is parsed
// as it arrived: header names and values in arrival order, repeats kept,
// because a capture must reproduce the request (cpp-httplib sorts headers by
// name, which is why idem frames requests itself). Pure: bytes in, results
// out; the server does the I/O.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::net {

using HeaderPairs = std::vector<std::pair<std::string, std::string>>;

struct RequestHead {
    std::string method;
    std::string target; // as sent: path and query
    int minor_version = 1;
    HeaderPairs headers;

    // The first header of that name, compared case-insensitively.
    [[nodiscard]] std::optional<std::string_view> header(std::string_view name) const;
};

enum class BodyFraming { none, length, chunked };

struct HeadParse {
    enum class Status { incomplete, complete, bad };
    Status status = Status::incomplete;
    std::size_t head_bytes = 0; // complete: the head's bytes, its blank line included
    RequestHead head;
    BodyFraming framing = BodyFraming::none;
    std::uint64_t content_length = 0;
    bool keep_alive = true;
    bool expects_continue = false;
    // bad: the status to answer with (400, 431, 501, 505) and why.
    int error_status = 400;
    std::string error;
};

// Parses the request head at the start of `buffer` (empty lines before the
// request line are skipped). `incomplete` means "read more"; a buffer that
// holds max_head_bytes without a complete head is bad with 431. Requests
// carrying both Content-Length and Transfer-Encoding are refused (400): the
// two framings disagreeing is how request smuggling starts.
[[nodiscard]] HeadParse parse_request_head(std::string_view buffer, std::size_t max_head_bytes);

// Finds where a request head ends as its bytes arrive, so that a head sent
// one byte at a time is scanned once, not once per byte (parsing the whole
// buffer on every read is quadratic: a slowloris's weapon).
class HeadScanner {
public:
    // The size of the head (its blank line included) once `buffer` holds a
    // complete one, else nullopt. `buffer` only grows between calls (until
    // reset()); bytes already scanned are not scanned again.
    std::optional<std::size_t> scan(std::string_view buffer);
    void reset() { *this = HeadScanner(); }

private:
    std::size_t m_scanned = 0;    // bytes looked at
    std::size_t m_line_start = 0; // where the line being scanned starts
    bool m_started = false;       // past the empty lines a request may start with
    bool m_seen_request_line = false;
};

// Decodes a chunked body (RFC 9112 section 7.1) as its bytes arrive.
// Extensions and trailers are read and dropped.
class ChunkedDecoder {
public:
    enum class Status { more, done, bad, too_large };
    struct Step {
        std::size_t consumed = 0; // input bytes used; keep the rest for the next call
        Status status = Status::more;
        std::string error;
    };

    explicit ChunkedDecoder(std::uint64_t max_body_bytes) : m_max_body_bytes(max_body_bytes) {}

    // Appends decoded bytes to `body`. Stops at an incomplete line, so the
    // caller passes the unconsumed rest again with more bytes appended.
    Step feed(std::string_view input, std::string& body);

private:
    enum class State { size_line, data, data_end, trailer, finished };
    State m_state = State::size_line;
    std::uint64_t m_remaining = 0;
    std::uint64_t m_max_body_bytes;
};

// Why a request built from a record must not be sent, or nullopt: a method
// that is not a token, a URL with spaces or control bytes, a header name
// that is not a token or a value with a control byte. A crafted capture
// could otherwise smuggle a second request or header into the wire format.
[[nodiscard]] std::optional<std::string>
request_problem(std::string_view method, std::string_view url, const HeaderPairs& headers);

// Whether `status` can end an exchange: 200-599. A 1xx is interim, and
// anything else is not HTTP; a gateway answers 502 for either.
[[nodiscard]] bool is_final_status(int status);

// Whether `value` is a Retry-After (RFC 9110 section 10.2.3): delay-seconds
// or an HTTP-date, visible ASCII and spaces only.
[[nodiscard]] bool is_retry_after_value(std::string_view value);

// Whether a header may be written as it is: a token name and a value with
// no control byte (a CR or LF would start a header of someone else's choosing).
[[nodiscard]] bool is_writable_header(std::string_view name, std::string_view value);

// The reason phrase for a status code ("OK", "Not Found"; "" when unknown).
[[nodiscard]] std::string_view reason_phrase(int status);

} // namespace idem::net
