// HTTP/1.1 request heads and chunked bodies (RFC 9112), from untrusted bytes.

#include "idem/net/http_request.hpp"

#include "idem/net/target.hpp"

#include "idem/util/text.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace idem::net {

namespace {

// A line must fit here; longer chunk-size or trailer lines are an attack or
// a broken client, not a body.
constexpr std::size_t k_max_chunk_line_bytes = 4096;

bool is_token_char(char c) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 32 || u >= 127) return false;
    return std::string_view("\"(),/:;<=>?@[\\]{}").find(c) == std::string_view::npos;
}

bool is_token(std::string_view text) {
    return !text.empty() && std::all_of(text.begin(), text.end(), is_token_char);
}

// A field value may hold visible bytes, spaces, tabs and obs-text, never
// control bytes (a CR or LF inside a value is how header injection starts).
bool is_field_value(std::string_view text) {
    return std::none_of(text.begin(), text.end(), [](char c) {
        auto u = static_cast<unsigned char>(c);
        return (u < 32 && c != '\t') || u == 127;
    });
}

std::string_view trim_ows(std::string_view text) {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
        text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
        text.remove_suffix(1);
    return text;
}

// The next line of `text` from `offset`, without its CRLF (or bare LF);
// nullopt when no line end has arrived yet.
struct Line {
    std::string_view text;
    std::size_t next = 0;
};
std::optional<Line> next_line(std::string_view text, std::size_t offset) {
    auto end = text.find('\n', offset);
    if (end == std::string_view::npos) return std::nullopt;
    auto line = text.substr(offset, end - offset);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return Line{line, end + 1};
}

HeadParse bad(int status, std::string message) {
    HeadParse result;
    result.status = HeadParse::Status::bad;
    result.error_status = status;
    result.error = std::move(message);
    return result;
}

// The path and query a request target names (RFC 9112 section 3.2), or
// nullopt when it is none of the forms a server for webhooks accepts:
// origin-form ("/path?query"), asterisk-form ("*", OPTIONS only), and
// absolute-form ("http://host/path"), of which only the path and query are
// kept, never the host. Anything else ("@host/x", ".host/x", "host:port")
// would, appended to a configured origin, name another host.
std::optional<std::string_view> origin_form_of(std::string_view method, std::string_view target) {
    if (target == "*") return method == "OPTIONS" ? std::optional(target) : std::nullopt;
    std::string_view path_and_query = target;
    for (std::string_view scheme : {"http://", "https://"}) {
        if (target.size() > scheme.size() && iequals(target.substr(0, scheme.size()), scheme)) {
            auto rest = target.substr(scheme.size());
            auto path_start = rest.find_first_of("/?");
            if (path_start == 0) return std::nullopt; // no authority
            if (path_start == std::string_view::npos) return "/";
            path_and_query = rest.substr(path_start);
            if (path_and_query.front() == '?') return std::nullopt; // "/" would need a copy
            break;
        }
    }
    // The rule replay applies to a captured path, applied where it is captured.
    if (captured_path_problem(path_and_query)) return std::nullopt;
    return path_and_query;
}

bool parse_request_line(std::string_view line, RequestHead& head, HeadParse& failure) {
    auto first_space = line.find(' ');
    auto last_space = line.rfind(' ');
    if (first_space == std::string_view::npos || first_space == last_space) {
        failure = bad(400, "malformed request line " + quote(line, 80));
        return false;
    }
    auto method = line.substr(0, first_space);
    auto target = line.substr(first_space + 1, last_space - first_space - 1);
    auto version = line.substr(last_space + 1);
    if (!is_token(method)) {
        failure = bad(400, "malformed method " + quote(method, 40));
        return false;
    }
    if (target.empty() || !std::all_of(target.begin(), target.end(), [](char c) {
            auto u = static_cast<unsigned char>(c);
            return u > 32 && u != 127;
        })) {
        failure = bad(400, "malformed request target " + quote(target, 80));
        return false;
    }
    if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '0' ||
        version[7] > '9') {
        failure = bad(505, "unsupported protocol " + quote(version, 40) + ": idem speaks HTTP/1.x");
        return false;
    }
    auto origin_form = origin_form_of(method, target);
    if (!origin_form) {
        failure = bad(400, "request target " + quote(target, 80) +
                               " is not a path ('/...'), '*' (OPTIONS) or an absolute URL");
        return false;
    }
    head.method = method;
    head.target = *origin_form;
    head.minor_version = version[7] - '0';
    return true;
}

// Content-Length, Transfer-Encoding, Connection and Expect decide framing.
bool apply_framing(HeadParse& result) {
    const auto& head = result.head;
    std::optional<std::uint64_t> length;
    bool chunked = false;
    bool has_transfer_encoding = false;
    bool connection_close = false;
    bool connection_keep_alive = false;
    int hosts = 0;
    for (const auto& [name, value] : head.headers) {
        if (iequals(name, "Host")) {
            // RFC 9112 section 3.2: two Host lines name two hosts; which one
            // the request is for is anybody's guess.
            if (++hosts > 1) {
                result = bad(400, "more than one Host header");
                return false;
            }
        } else if (iequals(name, "Content-Length")) {
            std::uint64_t parsed = 0;
            auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
            if (value.empty() || error != std::errc() || end != value.data() + value.size()) {
                result = bad(400, "malformed Content-Length " + quote(value, 40));
                return false;
            }
            if (length && *length != parsed) {
                result = bad(400, "conflicting Content-Length headers");
                return false;
            }
            length = parsed;
        } else if (iequals(name, "Transfer-Encoding")) {
            // A second line is a second coding (RFC 9112 section 6.1):
            // chunked applied twice is never valid, and read as once it is
            // a body framed two ways.
            if (has_transfer_encoding) {
                result = bad(400, "more than one Transfer-Encoding header: chunked is applied "
                                  "at most once");
                return false;
            }
            has_transfer_encoding = true;
            auto codings = split(value, ',');
            auto last = trim_ows(codings.back());
            if (!iequals(last, "chunked") || codings.size() > 1) {
                result = bad(501, "unsupported Transfer-Encoding " + quote(value, 40) +
                                      ": only chunked is accepted");
                return false;
            }
            chunked = true;
        } else if (iequals(name, "Connection")) {
            for (auto option : split(value, ',')) {
                if (iequals(trim_ows(option), "close")) connection_close = true;
                if (iequals(trim_ows(option), "keep-alive")) connection_keep_alive = true;
            }
        } else if (iequals(name, "Expect")) {
            result.expects_continue = iequals(trim_ows(value), "100-continue");
        }
    }
    if (has_transfer_encoding && length) {
        result = bad(400, "both Content-Length and Transfer-Encoding: refused (request smuggling)");
        return false;
    }
    result.framing = chunked ? BodyFraming::chunked
                             : (length && *length > 0 ? BodyFraming::length : BodyFraming::none);
    result.content_length = length.value_or(0);
    result.keep_alive = head.minor_version >= 1 ? !connection_close : connection_keep_alive;
    return true;
}

} // namespace

std::optional<std::string_view> RequestHead::header(std::string_view name) const {
    for (const auto& [header_name, value] : headers)
        if (iequals(header_name, name)) return std::string_view(value);
    return std::nullopt;
}

HeadParse parse_request_head(std::string_view buffer, std::size_t max_head_bytes) {
    std::size_t offset = 0;
    // RFC 9112 section 2.2: ignore empty lines before the request line.
    while (offset < buffer.size() && (buffer[offset] == '\r' || buffer[offset] == '\n'))
        ++offset;
    auto view = buffer.substr(0, std::min(buffer.size(), offset + max_head_bytes));
    const std::size_t start = offset;
    HeadParse result;
    auto request_line = next_line(view, offset);
    if (!request_line) {
        if (view.size() - start >= max_head_bytes)
            return bad(431, "request line longer than " + format_bytes(max_head_bytes));
        return result;
    }
    if (!parse_request_line(request_line->text, result.head, result)) return result;
    offset = request_line->next;
    while (true) {
        auto line = next_line(view, offset);
        if (!line) {
            if (view.size() - start >= max_head_bytes)
                return bad(431, "request head larger than " + format_bytes(max_head_bytes));
            return HeadParse{};
        }
        offset = line->next;
        if (line->text.empty()) break;
        if (line->text.front() == ' ' || line->text.front() == '\t')
            return bad(400, "obsolete header line folding is not accepted");
        auto colon = line->text.find(':');
        if (colon == std::string_view::npos)
            return bad(400, "header line without ':' " + quote(line->text, 80));
        auto name = line->text.substr(0, colon);
        auto value = trim_ows(line->text.substr(colon + 1));
        if (!is_token(name)) return bad(400, "malformed header name " + quote(name, 80));
        if (!is_field_value(value))
            return bad(400, "control byte in the value of header " + quote(name, 80));
        result.head.headers.emplace_back(name, value);
    }
    result.head_bytes = offset;
    if (!apply_framing(result)) return result;
    result.status = HeadParse::Status::complete;
    return result;
}

std::optional<std::size_t> HeadScanner::scan(std::string_view buffer) {
    while (true) {
        if (!m_started) {
            // RFC 9112 section 2.2: empty lines before the request line are skipped.
            while (m_scanned < buffer.size() &&
                   (buffer[m_scanned] == '\r' || buffer[m_scanned] == '\n'))
                ++m_scanned;
            if (m_scanned == buffer.size()) return std::nullopt;
            m_started = true;
            m_line_start = m_scanned;
        }
        auto newline = buffer.find('\n', m_scanned);
        if (newline == std::string_view::npos) {
            m_scanned = buffer.size();
            return std::nullopt;
        }
        auto line = buffer.substr(m_line_start, newline - m_line_start);
        m_scanned = newline + 1;
        // The head ends at the first empty line (or a lone CR) after the request line.
        if (m_seen_request_line && (line.empty() || line == "\r")) return m_scanned;
        m_seen_request_line = true;
        m_line_start = m_scanned;
    }
}

ChunkedDecoder::Step ChunkedDecoder::feed(std::string_view input, std::string& body) {
    Step step;
    auto fail = [&](std::string message) {
        step.status = Status::bad;
        step.error = std::move(message);
        return step;
    };
    while (step.consumed < input.size() || m_state == State::finished) {
        if (m_state == State::finished) {
            step.status = Status::done;
            return step;
        }
        if (m_state == State::data) {
            auto take = std::min<std::uint64_t>(m_remaining, input.size() - step.consumed);
            body.append(input.substr(step.consumed, static_cast<std::size_t>(take)));
            step.consumed += static_cast<std::size_t>(take);
            m_remaining -= take;
            if (m_remaining == 0) m_state = State::data_end;
            continue;
        }
        auto line = next_line(input, step.consumed);
        if (!line) {
            if (input.size() - step.consumed > k_max_chunk_line_bytes)
                return fail("chunk line longer than " + format_bytes(k_max_chunk_line_bytes));
            return step;
        }
        step.consumed = line->next;
        if (m_state == State::data_end) {
            if (!line->text.empty()) return fail("chunk data longer than its size");
            m_state = State::size_line;
        } else if (m_state == State::size_line) {
            auto size_text = trim_ows(line->text.substr(0, line->text.find(';')));
            std::uint64_t size = 0;
            auto [end, error] =
                std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
            if (size_text.empty() || error != std::errc() ||
                end != size_text.data() + size_text.size())
                return fail("malformed chunk size " + quote(line->text, 40));
            if (size > m_max_body_bytes || body.size() + size > m_max_body_bytes) {
                step.status = Status::too_large;
                return step;
            }
            m_remaining = size;
            m_state = size == 0 ? State::trailer : State::data;
        } else if (m_state == State::trailer) {
            if (line->text.empty()) m_state = State::finished;
        }
    }
    return step;
}

std::optional<std::string> request_problem(std::string_view method, std::string_view url,
                                           const HeaderPairs& headers) {
    if (!is_token(method)) return "method " + quote(method, 40) + " is not an HTTP token";
    if (url.empty() || std::any_of(url.begin(), url.end(), [](char c) {
            auto u = static_cast<unsigned char>(c);
            return u <= 32 || u == 127;
        }))
        return "URL " + quote(url, 80) + " holds spaces or control bytes";
    for (const auto& [name, value] : headers) {
        if (!is_token(name)) return "header name " + quote(name, 40) + " is not an HTTP token";
        if (!is_field_value(value))
            return "header " + quote(name, 40) + " has a control byte in its value";
    }
    return std::nullopt;
}

bool is_final_status(int status) {
    return status >= 200 && status <= 599;
}

bool is_retry_after_value(std::string_view value) {
    if (value.empty() || value.size() > 64) return false;
    if (std::all_of(value.begin(), value.end(), [](char c) { return c >= '0' && c <= '9'; }))
        return true;
    // An HTTP-date: "Sun, 06 Nov 1994 08:49:37 GMT" and its obsolete forms.
    return std::all_of(value.begin(), value.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == ' ' || c == ',' || c == ':' ||
               c == '-';
    });
}

bool is_writable_header(std::string_view name, std::string_view value) {
    return is_token(name) && is_field_value(value);
}

std::string_view reason_phrase(int status) {
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 413:
        return "Content Too Large";
    case 422:
        return "Unprocessable Content";
    case 425:
        return "Too Early";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "";
    }
}

} // namespace idem::net
