#pragma once
// A small HTTP/1.1 server for `idem listen`: one thread per connection up to
// a cap, keep-alive, Content-Length and chunked bodies, `Expect:
// 100-continue`, and the limits an endpoint on the internet needs (body
// size, head size, a deadline for the head against slow clients, an idle
// timeout, a connection cap). Requests reach the handler exactly as they
// arrived (see http_request.hpp).

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
    std::size_t max_connections = 256;
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
    // Called from connection threads, concurrently: must be thread-safe.
    std::function<Response(IncomingRequest&)> handle;
    std::function<void(const RefusedRequest&)> refused;
    // Called from the accepting thread a few times a second (a progress line).
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

    // Serves until `stop` becomes true; then stops accepting, lets requests
    // in flight finish (their answers say `Connection: close`), closes idle
    // connections, and returns once every connection thread has ended.
    void serve(const ServerCallbacks& callbacks, const std::atomic<bool>& stop);

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
    int m_port = 0;
};

} // namespace idem::net
