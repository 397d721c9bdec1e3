// HttpServer's connections: accepted, read, answered and closed on the
// event loop's thread (detail/http_server_impl.hpp).

#include "idem/net/detail/http_server_impl.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <unistd.h>

namespace idem::net {

using namespace detail;

void HttpServer::Impl::watch(Connection& connection, std::uint32_t events) {
    if (connection.registered && connection.events == events) return;
    epoll_event event{};
    event.events = events;
    event.data.u64 = connection.id;
    int op = connection.registered ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (::epoll_ctl(epoll_fd.get(), op, connection.fd, &event) == 0) {
        connection.registered = true;
        connection.events = events;
    }
}

void HttpServer::Impl::mark_idle(Connection& connection) {
    if (connection.idle_position) return;
    connection.idle_since = server_now();
    connection.idle_position = idle_order.insert(idle_order.end(), connection.id);
}

void HttpServer::Impl::mark_busy(Connection& connection) {
    if (!connection.idle_position) return;
    idle_order.erase(*connection.idle_position);
    connection.idle_position.reset();
}

bool HttpServer::Impl::evict_idle() {
    if (idle_order.empty()) return false;
    auto found = connections.find(idle_order.front());
    if (found == connections.end()) {
        idle_order.pop_front();
        return true;
    }
    if (server_now() - found->second->idle_since < k_min_idle_before_eviction) return false;
    close_connection(*found->second);
    return true;
}

// At the cap with no idle connection to close: the one whose head has been
// arriving the longest goes. A sender's head comes in one or two packets,
// so a head still incomplete after k_min_slow_head is a slow (or hostile)
// client holding a place; closing it lets a new connection in instead of
// answering 503 to everyone while a few hundred connections drip bytes.
// A scan, but only at the cap.
bool HttpServer::Impl::evict_slowest_head() {
    Connection* slowest = nullptr;
    for (auto& [id, connection] : connections)
        if (connection->state == Connection::State::head && connection->request_begun &&
            (!slowest || connection->head_since < slowest->head_since))
            slowest = connection.get();
    if (!slowest || server_now() - slowest->head_since < k_min_slow_head) return false;
    close_connection(*slowest);
    return true;
}

void HttpServer::Impl::notice(const std::string& message) {
    auto now = server_now();
    if (last_notice && now - *last_notice < k_notice_interval) return;
    last_notice = now;
    if (callbacks && callbacks->notice) callbacks->notice(message);
}

void HttpServer::Impl::accept_all() {
    // A bounded batch per wake-up, so connections already open get their turn.
    for (int batch = 0; batch < 256; ++batch) {
        sockaddr_storage peer{};
        socklen_t peer_length = sizeof peer;
        int fd = ::accept4(listen_fd.get(), reinterpret_cast<sockaddr*>(&peer), &peer_length,
                           SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd >= 0) {
            UniqueFd socket(fd);
            admit(std::move(socket), describe_peer(peer));
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
            // Out of descriptors or memory: make room by closing the longest
            // idle connection, else stop accepting for a moment. Never spin.
            int error = errno;
            if (evict_idle() || evict_slowest_head()) continue;
            notice(fmt::format("cannot accept connections: {}; pausing for {} ms",
                               std::strerror(error), k_accept_backoff.count()));
            ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, listen_fd.get(), nullptr);
            accept_paused_until = server_now() + k_accept_backoff;
            return;
        }
        return;
    }
}

void HttpServer::Impl::admit(UniqueFd socket, std::string remote) {
    int fd = socket.get();
    int on = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    if (connections.size() >= limits.max_connections && !evict_idle() && !evict_slowest_head()) {
        // Every connection is in the middle of a request: this one must wait.
        auto busy = render_response(error_response(503, "too many connections; retry later"), false,
                                    BodyWanted::yes);
        [[maybe_unused]] auto sent = ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
        socket.reset();
        if (callbacks->refused)
            callbacks->refused({std::move(remote), 503,
                                "connection cap reached (--max-connections), every connection "
                                "mid-request"});
        return;
    }
    auto connection = std::make_unique<Connection>();
    connection->id = next_id++;
    connection->socket = std::move(socket);
    connection->fd = fd;
    connection->remote = std::move(remote);
    connection->deadline = server_now() + limits.idle_timeout;
    auto& added = *connection;
    connections.emplace(added.id, std::move(connection));
    watch(added, EPOLLIN | EPOLLRDHUP);
    if (!added.registered) {
        close_connection(added);
        return;
    }
    mark_idle(added);
}

void HttpServer::Impl::close_connection(Connection& connection) {
    mark_busy(connection);
    if (connection.registered) ::epoll_ctl(epoll_fd.get(), EPOLL_CTL_DEL, connection.fd, nullptr);
    buffered_body_bytes -= connection.body_budget;
    connections.erase(connection.id); // destroys `connection`
}

void HttpServer::Impl::refuse(Connection& connection, int status, const std::string& reason) {
    if (callbacks->refused) callbacks->refused({connection.remote, status, reason});
    if (status == 0) {
        close_connection(connection);
        return;
    }
    answer(connection, error_response(status, reason), false);
}

void HttpServer::Impl::on_readable(Connection& connection) {
    char chunk[k_read_chunk_bytes];
    auto got = ::recv(connection.fd, chunk, sizeof chunk, 0);
    if (got < 0) {
        if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) return;
        got = 0;
    }
    if (got == 0) {
        if (connection.idle())
            close_connection(connection);
        else
            refuse(connection, 0, "connection closed mid-request");
        return;
    }
    connection.in.append(chunk, static_cast<std::size_t>(got));
    process(connection);
}

// Moves a connection on as far as the bytes it has allow.
void HttpServer::Impl::process(Connection& connection) {
    auto id = connection.id;
    if (connection.state == Connection::State::head && !read_head(connection)) return;
    if (!connections.contains(id)) return;
    if (connection.state == Connection::State::body) read_body(connection);
}

// False while the head is incomplete, or when the connection was refused.
bool HttpServer::Impl::read_head(Connection& connection) {
    if (connection.in.empty()) return false;
    if (!connection.request_begun) {
        // A request has begun: from its first byte the head has --header-timeout.
        connection.request_begun = true;
        mark_busy(connection);
        connection.head_since = server_now();
        connection.deadline = connection.head_since + limits.header_timeout;
        connection.request.received_at = now_utc();
    }
    auto head_end = connection.scanner.scan(connection.in);
    if (!head_end) {
        if (connection.in.size() < limits.max_head_bytes) return false;
        auto parsed = parse_request_head(connection.in, limits.max_head_bytes);
        if (parsed.status == HeadParse::Status::bad) {
            refuse(connection, parsed.error_status, parsed.error);
            return false;
        }
        // Only empty lines so far: refuse a flood of them, too.
        if (connection.in.size() >= 2 * limits.max_head_bytes)
            refuse(connection, 431,
                   "request head larger than " + format_bytes(limits.max_head_bytes));
        return false;
    }
    auto parsed = parse_request_head(std::string_view(connection.in).substr(0, *head_end),
                                     limits.max_head_bytes);
    if (parsed.status != HeadParse::Status::complete) {
        refuse(connection, parsed.status == HeadParse::Status::bad ? parsed.error_status : 400,
               parsed.status == HeadParse::Status::bad ? parsed.error : "malformed request head");
        return false;
    }
    connection.in.erase(0, *head_end);
    connection.scanner.reset();
    connection.answer_without_body = parsed.head.method == "HEAD";
    // RFC 9112 section 6.1: a Transfer-Encoding in an HTTP/1.0 request
    // means the framing cannot be trusted: close after answering.
    connection.close_after_answer =
        parsed.head.minor_version == 0 && parsed.framing == BodyFraming::chunked;
    connection.request.head = std::move(parsed.head);
    connection.request.remote = connection.remote;
    connection.request.body.clear();
    connection.parsed = std::move(parsed);
    const auto& framing = connection.parsed;
    if (framing.framing == BodyFraming::length && framing.content_length > limits.max_body_bytes) {
        refuse(connection, 413,
               fmt::format("body of {} larger than --max-body {}",
                           format_bytes(framing.content_length),
                           format_bytes(limits.max_body_bytes)));
        return false;
    }
    if (framing.framing == BodyFraming::length && !reserve_body(connection, framing.content_length))
        return false;
    if (framing.framing == BodyFraming::chunked) connection.chunked.emplace(limits.max_body_bytes);
    if (framing.expects_continue && framing.framing != BodyFraming::none && connection.in.empty()) {
        static constexpr std::string_view k_continue = "HTTP/1.1 100 Continue\r\n\r\n";
        [[maybe_unused]] auto sent =
            ::send(connection.fd, k_continue.data(), k_continue.size(), MSG_NOSIGNAL);
    }
    connection.state = Connection::State::body;
    connection.deadline = server_now() + limits.idle_timeout;
    return true;
}

bool HttpServer::Impl::reserve_body(Connection& connection, std::uint64_t total_bytes) {
    if (total_bytes <= connection.body_budget) return true;
    auto more = total_bytes - connection.body_budget;
    if (buffered_body_bytes + more > limits.max_buffered_body_bytes) {
        refuse(connection, 503, "too many request bodies in progress; retry later");
        return false;
    }
    buffered_body_bytes += more;
    connection.body_budget = total_bytes;
    return true;
}

void HttpServer::Impl::read_body(Connection& connection) {
    auto& body = connection.request.body;
    const auto& parsed = connection.parsed;
    if (parsed.framing == BodyFraming::length) {
        auto length = static_cast<std::size_t>(parsed.content_length);
        auto take = std::min(length - body.size(), connection.in.size());
        body.append(connection.in, 0, take);
        connection.in.erase(0, take);
        if (body.size() < length) return;
    } else if (parsed.framing == BodyFraming::chunked) {
        auto step = connection.chunked->feed(connection.in, body);
        connection.in.erase(0, step.consumed);
        if (!reserve_body(connection, body.size())) return;
        if (step.status == ChunkedDecoder::Status::bad) return refuse(connection, 400, step.error);
        if (step.status == ChunkedDecoder::Status::too_large)
            return refuse(connection, 413,
                          fmt::format("chunked body larger than --max-body {}",
                                      format_bytes(limits.max_body_bytes)));
        if (step.status != ChunkedDecoder::Status::done) return;
    }
    dispatch(connection);
}

void HttpServer::Impl::dispatch(Connection& connection) {
    if (pending_requests >= limits.max_pending_requests)
        return refuse(connection, 503, "too many requests in progress; retry later");
    ++pending_requests;
    connection.state = Connection::State::handling;
    // Nothing more is read until the answer is out (a sender that half-closes
    // after its request still wants the answer); a reset still shows as
    // EPOLLERR or EPOLLHUP, which epoll always reports.
    watch(connection, 0);
    {
        std::lock_guard lock(pool_mutex);
        jobs.push_back({connection.id, std::move(connection.request)});
    }
    connection.request = IncomingRequest{};
    pool_wake.notify_one();
}

void HttpServer::Impl::finish_requests() {
    std::uint64_t count = 0;
    [[maybe_unused]] auto got = ::read(wake_fd.get(), &count, sizeof count);
    std::vector<Completion> done;
    {
        std::lock_guard lock(pool_mutex);
        done.swap(completions);
    }
    for (auto& completion : done) {
        --pending_requests;
        auto found = connections.find(completion.connection);
        if (found == connections.end()) continue;
        auto& connection = *found->second;
        buffered_body_bytes -= connection.body_budget;
        connection.body_budget = 0;
        if (completion.failure && callbacks->refused)
            callbacks->refused({connection.remote, 500, *completion.failure});
        if (connection.peer_gone) {
            close_connection(connection);
            continue;
        }
        if (completion.response.drop_connection) {
            ::shutdown(connection.fd, SHUT_RDWR);
            close_connection(connection);
            continue;
        }
        bool keep_alive = connection.parsed.keep_alive && !stopping && !completion.failure &&
                          !connection.close_after_answer;
        answer(connection, completion.response, keep_alive);
    }
}

void HttpServer::Impl::answer(Connection& connection, const Response& response, bool keep_alive) {
    bool head_request =
        connection.state != Connection::State::head && connection.answer_without_body;
    connection.out =
        render_response(response, keep_alive, head_request ? BodyWanted::no : BodyWanted::yes);
    connection.out_sent = 0;
    connection.close_after_write = !keep_alive;
    connection.state = Connection::State::writing;
    connection.deadline = server_now() + limits.idle_timeout;
    mark_busy(connection);
    flush(connection);
}

void HttpServer::Impl::flush(Connection& connection) {
    while (connection.out_sent < connection.out.size()) {
        auto sent = ::send(connection.fd, connection.out.data() + connection.out_sent,
                           connection.out.size() - connection.out_sent, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            watch(connection, EPOLLOUT | EPOLLRDHUP);
            return;
        }
        if (sent <= 0) {
            close_connection(connection);
            return;
        }
        connection.out_sent += static_cast<std::size_t>(sent);
    }
    if (connection.close_after_write) {
        ::shutdown(connection.fd, SHUT_WR);
        close_connection(connection);
        return;
    }
    connection.out.clear();
    connection.out_sent = 0;
    connection.state = Connection::State::head;
    connection.request_begun = false;
    connection.parsed = HeadParse{};
    connection.chunked.reset();
    connection.deadline = server_now() + limits.idle_timeout;
    watch(connection, EPOLLIN | EPOLLRDHUP);
    if (connection.in.empty()) {
        mark_idle(connection);
        return;
    }
    process(connection); // a pipelined request already arrived
}

void HttpServer::Impl::check_deadlines() {
    auto now = server_now();
    std::vector<std::uint64_t> expired;
    for (const auto& [id, connection] : connections)
        if (connection->state != Connection::State::handling && now >= connection->deadline)
            expired.push_back(id);
    for (auto id : expired) {
        auto found = connections.find(id);
        if (found == connections.end()) continue;
        auto& connection = *found->second;
        if (connection.idle() || connection.state == Connection::State::writing)
            close_connection(connection); // an idle keep-alive, or a sender that stopped reading
        else if (connection.state == Connection::State::head)
            refuse(connection, 408, "request head not complete within --header-timeout");
        else
            refuse(connection, 408, "body not complete within --idle-timeout");
    }
}

} // namespace idem::net
