// The connection threads and the accept loop of HttpServer.

#include "idem/net/http_server.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace idem::net {

namespace {

using Clock = std::chrono::steady_clock;

// How often a waiting thread looks at the stop flag.
constexpr auto k_stop_poll_interval = std::chrono::milliseconds(50);

std::string describe_peer(const sockaddr_storage& address) {
    char host[INET6_ADDRSTRLEN] = {};
    int port = 0;
    if (address.ss_family == AF_INET) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
        port = ntohs(v4->sin_port);
        return fmt::format("{}:{}", host, port);
    }
    if (address.ss_family == AF_INET6) {
        const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
        port = ntohs(v6->sin6_port);
        return fmt::format("[{}]:{}", host, port);
    }
    return "unknown";
}

bool send_all(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        auto sent = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (sent < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        bytes.remove_prefix(static_cast<std::size_t>(sent));
    }
    return true;
}

std::string render_response(const Response& response, bool keep_alive) {
    std::string out =
        fmt::format("HTTP/1.1 {} {}\r\n", response.status, reason_phrase(response.status));
    for (const auto& [name, value] : response.headers)
        out += fmt::format("{}: {}\r\n", name, value);
    out += fmt::format("Content-Length: {}\r\n", response.body.size());
    out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    out += response.body;
    return out;
}

Response error_response(int status, std::string_view reason) {
    Response response;
    response.status = status;
    response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
    response.body = fmt::format("{}\n", reason);
    return response;
}

enum class ReadOutcome { data, closed, timeout, stopping };

// Reads what is available into `buffer`, waiting until `deadline`. While
// `idle` (no request begun), a stop request ends the wait.
ReadOutcome read_some(int fd, std::string& buffer, Clock::time_point deadline,
                      const std::atomic<bool>& stop, bool idle) {
    while (true) {
        if (idle && stop.load(std::memory_order_relaxed)) return ReadOutcome::stopping;
        auto now = Clock::now();
        if (now >= deadline) return ReadOutcome::timeout;
        auto wait = std::min<Clock::duration>(deadline - now, k_stop_poll_interval);
        pollfd poll_fd{fd, POLLIN, 0};
        int ready = ::poll(
            &poll_fd, 1,
            static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(wait).count()) +
                1);
        if (ready < 0 && errno != EINTR) return ReadOutcome::closed;
        if (ready <= 0) continue;
        char chunk[16384];
        auto got = ::recv(fd, chunk, sizeof chunk, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return ReadOutcome::closed;
        buffer.append(chunk, static_cast<std::size_t>(got));
        return ReadOutcome::data;
    }
}

} // namespace

struct HttpServer::Impl {
    int listen_fd = -1;
    ServerLimits limits;

    struct Worker {
        std::thread thread;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::vector<Worker> workers;

    void serve_connection(int fd, const std::string& remote, const ServerCallbacks& callbacks,
                          const std::atomic<bool>& stop);
    bool serve_one(int fd, std::string& buffer, const std::string& remote,
                   const ServerCallbacks& callbacks, const std::atomic<bool>& stop);
    void reap_finished();
};

HttpServer::HttpServer(const std::string& bind_address, int port, ServerLimits limits)
    : m_impl(std::make_unique<Impl>()) {
    m_impl->limits = limits;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    auto port_text = std::to_string(port);
    if (int rc = ::getaddrinfo(bind_address.c_str(), port_text.c_str(), &hints, &found); rc != 0)
        throw UsageError(
            fmt::format("cannot bind to {}: {}", quote(bind_address), gai_strerror(rc)));
    std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
    int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
    if (fd < 0) throw NetworkError(fmt::format("cannot open a socket: {}", std::strerror(errno)));
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 1024) != 0) {
        int error = errno;
        ::close(fd);
        throw NetworkError(
            fmt::format("cannot listen on {}:{}: {}", bind_address, port, std::strerror(error)));
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    m_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    m_impl->listen_fd = fd;
}

HttpServer::~HttpServer() {
    if (m_impl->listen_fd >= 0) ::close(m_impl->listen_fd);
    for (auto& worker : m_impl->workers)
        worker.thread.join();
}

void HttpServer::Impl::reap_finished() {
    std::erase_if(workers, [](Worker& worker) {
        if (!worker.done->load()) return false;
        worker.thread.join();
        return true;
    });
}

void HttpServer::serve(const ServerCallbacks& callbacks, const std::atomic<bool>& stop) {
    auto& impl = *m_impl;
    while (!stop.load()) {
        impl.reap_finished();
        if (callbacks.tick) callbacks.tick();
        pollfd poll_fd{impl.listen_fd, POLLIN, 0};
        int ready = ::poll(&poll_fd, 1, static_cast<int>(k_stop_poll_interval.count()));
        if (ready <= 0) continue;
        sockaddr_storage peer{};
        socklen_t peer_length = sizeof peer;
        int fd = ::accept4(impl.listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_length,
                           SOCK_CLOEXEC);
        if (fd < 0) continue; // the peer gave up, or descriptors ran out: keep serving
        auto remote = describe_peer(peer);
        int on = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
        auto send_timeout =
            std::chrono::duration_cast<std::chrono::microseconds>(impl.limits.idle_timeout);
        timeval timeout{static_cast<time_t>(send_timeout.count() / 1000000),
                        static_cast<suseconds_t>(send_timeout.count() % 1000000)};
        ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
        if (impl.workers.size() >= impl.limits.max_connections) {
            auto busy = error_response(503, "too many connections; retry later");
            busy.headers.emplace_back("Retry-After", "1");
            send_all(fd, render_response(busy, false));
            ::close(fd);
            if (callbacks.refused)
                callbacks.refused({remote, 503, "connection cap reached (--max-connections)"});
            continue;
        }
        auto done = std::make_shared<std::atomic<bool>>(false);
        impl.workers.push_back({std::thread([&impl, fd, remote, &callbacks, &stop, done] {
                                    impl.serve_connection(fd, remote, callbacks, stop);
                                    done->store(true);
                                }),
                                done});
    }
    ::close(impl.listen_fd);
    impl.listen_fd = -1;
    for (auto& worker : impl.workers)
        worker.thread.join();
    impl.workers.clear();
}

void HttpServer::Impl::serve_connection(int fd, const std::string& remote,
                                        const ServerCallbacks& callbacks,
                                        const std::atomic<bool>& stop) {
    std::string buffer;
    try {
        while (serve_one(fd, buffer, remote, callbacks, stop)) {
        }
    } catch (const std::exception& error) {
        // A handler failure must not take the listener down with it.
        send_all(fd, render_response(error_response(500, error.what()), false));
    }
    ::close(fd);
}

// Serves one request; false when the connection is done.
bool HttpServer::Impl::serve_one(int fd, std::string& buffer, const std::string& remote,
                                 const ServerCallbacks& callbacks, const std::atomic<bool>& stop) {
    auto refuse = [&](int status, const std::string& reason) {
        if (status != 0) send_all(fd, render_response(error_response(status, reason), false));
        if (callbacks.refused) callbacks.refused({remote, status, reason});
        return false;
    };
    // The head: the idle timeout until its first byte, then the header deadline.
    auto idle_deadline = Clock::now() + limits.idle_timeout;
    std::optional<Clock::time_point> head_deadline;
    Timestamp received_at = now_utc();
    HeadParse parsed;
    while (true) {
        if (!buffer.empty()) {
            if (!head_deadline) {
                head_deadline = Clock::now() + limits.header_timeout;
                received_at = now_utc();
            }
            parsed = parse_request_head(buffer, limits.max_head_bytes);
            if (parsed.status == HeadParse::Status::bad)
                return refuse(parsed.error_status, parsed.error);
            if (parsed.status == HeadParse::Status::complete) break;
        }
        auto outcome =
            read_some(fd, buffer, head_deadline.value_or(idle_deadline), stop, buffer.empty());
        if (outcome == ReadOutcome::stopping || (outcome == ReadOutcome::closed && buffer.empty()))
            return false;
        if (outcome == ReadOutcome::closed) return refuse(0, "connection closed mid-request");
        if (outcome == ReadOutcome::timeout) {
            if (buffer.empty()) return false; // an idle keep-alive connection
            return refuse(408, "request head not complete within --header-timeout");
        }
    }
    buffer.erase(0, parsed.head_bytes);

    IncomingRequest request;
    request.head = std::move(parsed.head);
    request.remote = remote;
    request.received_at = received_at;
    if (parsed.framing == BodyFraming::length && parsed.content_length > limits.max_body_bytes)
        return refuse(413, fmt::format("body of {} larger than --max-body {}",
                                       format_bytes(parsed.content_length),
                                       format_bytes(limits.max_body_bytes)));
    if (parsed.expects_continue && parsed.framing != BodyFraming::none && buffer.empty())
        send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n");
    auto body_deadline = Clock::now() + limits.idle_timeout;
    if (parsed.framing == BodyFraming::length) {
        auto length = static_cast<std::size_t>(parsed.content_length);
        while (buffer.size() < length) {
            auto outcome = read_some(fd, buffer, body_deadline, stop, false);
            if (outcome == ReadOutcome::timeout)
                return refuse(408, "body not complete within --idle-timeout");
            if (outcome != ReadOutcome::data) return refuse(0, "connection closed mid-body");
        }
        request.body.assign(buffer, 0, length);
        buffer.erase(0, length);
    } else if (parsed.framing == BodyFraming::chunked) {
        ChunkedDecoder decoder(limits.max_body_bytes);
        while (true) {
            auto step = decoder.feed(buffer, request.body);
            buffer.erase(0, step.consumed);
            if (step.status == ChunkedDecoder::Status::done) break;
            if (step.status == ChunkedDecoder::Status::bad) return refuse(400, step.error);
            if (step.status == ChunkedDecoder::Status::too_large)
                return refuse(413, fmt::format("chunked body larger than --max-body {}",
                                               format_bytes(limits.max_body_bytes)));
            auto outcome = read_some(fd, buffer, body_deadline, stop, false);
            if (outcome == ReadOutcome::timeout)
                return refuse(408, "body not complete within --idle-timeout");
            if (outcome != ReadOutcome::data) return refuse(0, "connection closed mid-body");
        }
    }

    auto response = callbacks.handle(request);
    if (response.drop_connection) {
        ::shutdown(fd, SHUT_RDWR);
        return false;
    }
    bool keep_alive = parsed.keep_alive && !stop.load();
    if (!send_all(fd, render_response(response, keep_alive))) return false;
    return keep_alive;
}

} // namespace idem::net
