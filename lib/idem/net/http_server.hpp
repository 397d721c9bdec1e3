#pragma once
// A small HTTP/1.1 server for `idem listen`: one event-loop thread (epoll)
// that owns every connection, and a fixed pool of handler threads that run
// the request handler. An idle or slow connection costs a descriptor and a
// buffer, never a thread, so thousands of them cannot keep a normal sender
// from being answered. Keep-alive, Content-Length and chunked bodies,
// `Expect: 100-continue`, and the limits an endpoint on the internet needs
// (body size, head size, a deadline for the head against slow clients, an
// idle timeout, a connection cap, a cap on buffered bodies). Requests reach
// the handler exactly as they arrived (see http_request.hpp).

#include "idem/net/http_request.hpp"
#include "idem/util/time.hpp"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace idem::net {

struct ServerLimits {
    std::uint64_t max_body_bytes = 10ULL << 20;
    std::size_t max_head_bytes = 64 << 10;
    Duration header_timeout = std::chrono::seconds(10); // from a request's first byte
    Duration idle_timeout = std::chrono::seconds(60);   // between requests, and body reads
    // Open connections. At the cap, the connection idle the longest (no
    // request begun on it) is closed to make room, else the one whose head
    // has been arriving the longest (over 500 ms); only when every one is
    // past its head is a new connection answered 503.
    std::size_t max_connections = 16384;
    // Requests read and waiting for, or in, the handler. Beyond it: 503.
    std::size_t max_pending_requests = 1024;
    // Bytes of request bodies buffered across all connections. Beyond it: 503.
    std::uint64_t max_buffered_body_bytes = 512ULL << 20;
    std::size_t handler_threads = 32;
};

struct IncomingRequest {
    RequestHead head;
    std::string body;      // decoded when it came chunked
    std::string remote;    // "127.0.0.1:54321"
    Timestamp received_at; // when the request's first byte arrived
};

struct Response {
    int status = 200;
    HeaderPairs headers; // Content-Length and Connection are added
    std::string body;
    // Close the connection without answering (a flaky downstream's worst case).
    bool drop_connection = false;
};

// Requests the server answered itself, without the handler.
struct RefusedRequest {
    std::string remote;
    int status = 0; // 0: the connection was closed without an answer (a timeout)
    std::string reason;
};

struct ServerCallbacks {
    // Called from handler threads, concurrently: must be thread-safe.
    std::function<Response(IncomingRequest&)> handle;
    // Called from the event-loop thread.
    std::function<void(const RefusedRequest&)> refused;
    // Called from the event-loop thread about the server itself (descriptors
    // ran out, say): a warning, not a request.
    std::function<void(const std::string&)> notice;
    // Called from the event-loop thread a few times a second (a progress line).
    std::function<void()> tick;
};

class HttpServer {
public:
    // Binds and listens (port 0: any free port). Throws NetworkError.
    HttpServer(const std::string& bind_address, int port, ServerLimits limits);
    ~HttpServer();
    HttpServer(const HttpServer&) = delete;
    HttpServer& operator=(const HttpServer&) = delete;

    [[nodiscard]] int port() const { return m_port; }

    // Serves until `stop` becomes true; then stops accepting, closes idle
    // connections, lets requests already begun finish (their answers say
    // `Connection: close`), and returns once every connection is closed.
    void serve(const ServerCallbacks& callbacks, const std::atomic<bool>& stop);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    int m_port = 0;
};

} // namespace idem::net
