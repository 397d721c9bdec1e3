// The event loop and handler pool of HttpServer. One thread owns every
// descriptor (epoll, level-triggered); handler threads see only complete
// requests and hand their answers back through an eventfd.

#include "idem/net/http_server.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/unique_fd.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fmt/format.h>
#include <list>
#include <mutex>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <optional>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <system_error>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

namespace idem::net {

namespace {

using Clock = std::chrono::steady_clock;

// How often deadlines, the stop flag and the tick callback are looked at.
constexpr auto k_tick_interval = std::chrono::milliseconds(50);
// How long accepting pauses when descriptors run out and no idle connection
// can be closed for one.
constexpr auto k_accept_backoff = std::chrono::milliseconds(100);
// How often "descriptors ran out" is repeated while it lasts.
constexpr auto k_notice_interval = std::chrono::seconds(10);
constexpr std::size_t k_read_chunk_bytes = 64 << 10;
// A connection must have been idle this long before it is closed to make
// room: one just accepted may have its first bytes on the way.
constexpr auto k_min_idle_before_eviction = std::chrono::milliseconds(200);
// A head incomplete this long is slow enough to be closed for a newcomer.
constexpr auto k_min_slow_head = std::chrono::milliseconds(500);

// epoll's data for the two descriptors that are not connections.
constexpr std::uint64_t k_listen_tag = 0;
constexpr std::uint64_t k_wake_tag = 1;

std::string describe_peer(const sockaddr_storage& address) {
    char host[INET6_ADDRSTRLEN] = {};
    if (address.ss_family == AF_INET) {
        const auto* v4 = reinterpret_cast<const sockaddr_in*>(&address);
        inet_ntop(AF_INET, &v4->sin_addr, host, sizeof host);
        return fmt::format("{}:{}", host, ntohs(v4->sin_port));
    }
    if (address.ss_family == AF_INET6) {
        const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&address);
        inet_ntop(AF_INET6, &v6->sin6_addr, host, sizeof host);
        return fmt::format("[{}]:{}", host, ntohs(v6->sin6_port));
    }
    return "unknown";
}

// A HEAD answer carries the headers a GET would, and no body (RFC 9110 9.3.2).
enum class BodyWanted { yes, no };

std::string render_response(const Response& response, bool keep_alive, BodyWanted body) {
    std::string out =
        fmt::format("HTTP/1.1 {} {}\r\n", response.status, reason_phrase(response.status));
    for (const auto& [name, value] : response.headers)
        if (is_writable_header(name, value)) out += fmt::format("{}: {}\r\n", name, value);
    out += fmt::format("Content-Length: {}\r\n", response.body.size());
    out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    if (body == BodyWanted::yes) out += response.body;
    return out;
}

Response error_response(int status, std::string_view reason) {
    Response response;
    response.status = status;
    response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
    if (status == 503) response.headers.emplace_back("Retry-After", "1");
    response.body = fmt::format("{}\n", reason);
    return response;
}

// Lets this process hold as many connections as its hard limit allows:
// idle connections must cost descriptors, not refusals.
void raise_descriptor_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur >= limit.rlim_max) return;
    limit.rlim_cur = limit.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &limit);
}

struct Connection {
    enum class State { head, body, handling, writing };
    std::uint64_t id = 0;
    UniqueFd socket; // closed when the connection goes
    int fd = -1;     // socket's
    std::string remote;
    State state = State::head;
    std::string in; // received bytes not yet consumed
    HeadScanner scanner;
    HeadParse parsed;
    std::optional<ChunkedDecoder> chunked;
    IncomingRequest request;
    std::uint64_t body_budget = 0; // bytes of ServerLimits::max_buffered_body_bytes held
    std::string out;
    std::size_t out_sent = 0;
    bool close_after_write = false;
    bool peer_gone = false;           // hung up while its request was in the handler
    bool registered = false;          // in the epoll set
    bool request_begun = false;       // a byte of the next request has arrived
    bool answer_without_body = false; // the request was HEAD
    bool close_after_answer = false;  // the request's framing allows no keep-alive
    std::uint32_t events = 0;
    Clock::time_point deadline;
    Clock::time_point idle_since;
    Clock::time_point head_since; // the current request's first byte (state head)
    std::optional<std::list<std::uint64_t>::iterator> idle_position;

    [[nodiscard]] bool idle() const { return state == State::head && !request_begun && in.empty(); }
};

struct Job {
    std::uint64_t connection = 0;
    IncomingRequest request;
};

struct Completion {
    std::uint64_t connection = 0;
    Response response;
    std::optional<std::string> failure; // the handler threw: why (for stderr only)
};

} // namespace

struct HttpServer::Impl {
    UniqueFd listen_fd, epoll_fd, wake_fd;
    ServerLimits limits;
    const ServerCallbacks* callbacks = nullptr;
    bool stopping = false;

    std::unordered_map<std::uint64_t, std::unique_ptr<Connection>> connections;
    std::list<std::uint64_t> idle_order; // longest idle first
    std::uint64_t next_id = 2;
    std::size_t pending_requests = 0;
    std::uint64_t buffered_body_bytes = 0;
    std::optional<Clock::time_point> accept_paused_until;
    std::optional<Clock::time_point> last_notice;

    // The handler pool.
    std::mutex pool_mutex;
    std::condition_variable pool_wake;
    std::deque<Job> jobs;
    std::vector<Completion> completions;
    bool pool_stopping = false;
    std::vector<std::thread> handlers;

    void run_handler();
    void start_handlers();
    void stop_handlers();

    void watch(Connection& connection, std::uint32_t events);
    void accept_all();
    void admit(UniqueFd socket, std::string remote);
    bool evict_idle();
    bool evict_slowest_head();
    void mark_idle(Connection& connection);
    void mark_busy(Connection& connection);
    void on_readable(Connection& connection);
    void process(Connection& connection);
    bool read_head(Connection& connection);
    void read_body(Connection& connection);
    void dispatch(Connection& connection);
    void finish_requests();
    void answer(Connection& connection, const Response& response, bool keep_alive);
    void flush(Connection& connection);
    void refuse(Connection& connection, int status, const std::string& reason);
    void close_connection(Connection& connection);
    void check_deadlines();
    void notice(const std::string& message);
    [[nodiscard]] bool reserve_body(Connection& connection, std::uint64_t total_bytes);
};

HttpServer::HttpServer(const std::string& bind_address, int port, ServerLimits limits)
    : m_impl(std::make_unique<Impl>()) {
    m_impl->limits = limits;
    raise_descriptor_limit();
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
    UniqueFd socket(::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                             found->ai_protocol));
    int fd = socket.get();
    if (fd < 0) throw NetworkError(fmt::format("cannot open a socket: {}", std::strerror(errno)));
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (::bind(fd, found->ai_addr, found->ai_addrlen) != 0 || ::listen(fd, 4096) != 0) {
        int error = errno;
        throw NetworkError(
            fmt::format("cannot listen on {}:{}: {}", bind_address, port, std::strerror(error)));
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
    m_port = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                         : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    m_impl->listen_fd = std::move(socket);
    m_impl->epoll_fd.reset(::epoll_create1(EPOLL_CLOEXEC));
    m_impl->wake_fd.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
    if (!m_impl->epoll_fd.valid() || !m_impl->wake_fd.valid())
        throw NetworkError(fmt::format("cannot start the event loop: {}", std::strerror(errno)));
}

HttpServer::~HttpServer() {
    m_impl->stop_handlers();
    // The connections, the listening socket, the epoll and the eventfd
    // close with m_impl.
}

// ---- the handler pool -------------------------------------------------------

void HttpServer::Impl::start_handlers() {
    pool_stopping = false;
    for (std::size_t i = 0; i < std::max<std::size_t>(1, limits.handler_threads); ++i) {
        try {
            handlers.emplace_back([this] { run_handler(); });
        } catch (const std::system_error& error) {
            // Fewer handlers than asked is slower, not broken; none is broken.
            if (handlers.empty())
                throw NetworkError(fmt::format("cannot start a handler thread: {}", error.what()));
            notice(fmt::format("started {} of {} handler threads: {}", handlers.size(),
                               limits.handler_threads, error.what()));
            break;
        }
    }
}

void HttpServer::Impl::stop_handlers() {
    {
        std::lock_guard lock(pool_mutex);
        pool_stopping = true;
    }
    pool_wake.notify_all();
    for (auto& thread : handlers)
        thread.join();
    handlers.clear();
}

void HttpServer::Impl::run_handler() {
    while (true) {
        Job job;
        {
            std::unique_lock lock(pool_mutex);
            pool_wake.wait(lock, [&] { return pool_stopping || !jobs.empty(); });
            if (jobs.empty()) return;
            job = std::move(jobs.front());
            jobs.pop_front();
        }
        Completion done;
        done.connection = job.connection;
        try {
            done.response = callbacks->handle(job.request);
        } catch (const std::exception& error) {
            // A handler failure must not take the listener down with it. Its
            // message may name a store path or quote SQL: it goes to stderr,
            // and the sender gets a generic body.
            done.response = error_response(500, "internal error");
            done.failure = error.what();
        }
        {
            std::lock_guard lock(pool_mutex);
            completions.push_back(std::move(done));
        }
        std::uint64_t one = 1;
        [[maybe_unused]] auto written = ::write(wake_fd.get(), &one, sizeof one);
    }
}

// ---- connections ------------------------------------------------------------

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
    connection.idle_since = Clock::now();
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
    if (Clock::now() - found->second->idle_since < k_min_idle_before_eviction) return false;
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
    if (!slowest || Clock::now() - slowest->head_since < k_min_slow_head) return false;
    close_connection(*slowest);
    return true;
}

void HttpServer::Impl::notice(const std::string& message) {
    auto now = Clock::now();
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
            accept_paused_until = Clock::now() + k_accept_backoff;
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
    connection->deadline = Clock::now() + limits.idle_timeout;
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
        connection.head_since = Clock::now();
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
    connection.deadline = Clock::now() + limits.idle_timeout;
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
    connection.deadline = Clock::now() + limits.idle_timeout;
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
    connection.deadline = Clock::now() + limits.idle_timeout;
    watch(connection, EPOLLIN | EPOLLRDHUP);
    if (connection.in.empty()) {
        mark_idle(connection);
        return;
    }
    process(connection); // a pipelined request already arrived
}

void HttpServer::Impl::check_deadlines() {
    auto now = Clock::now();
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

// ---- the loop ---------------------------------------------------------------

void HttpServer::serve(const ServerCallbacks& callbacks, const std::atomic<bool>& stop) {
    auto& impl = *m_impl;
    impl.callbacks = &callbacks;
    impl.start_handlers();
    epoll_event listen_event{};
    listen_event.events = EPOLLIN;
    listen_event.data.u64 = k_listen_tag;
    ::epoll_ctl(impl.epoll_fd.get(), EPOLL_CTL_ADD, impl.listen_fd.get(), &listen_event);
    epoll_event wake_event{};
    wake_event.events = EPOLLIN;
    wake_event.data.u64 = k_wake_tag;
    ::epoll_ctl(impl.epoll_fd.get(), EPOLL_CTL_ADD, impl.wake_fd.get(), &wake_event);

    auto last_tick = Clock::now();
    std::vector<epoll_event> events(512);
    while (true) {
        if (stop.load() && !impl.stopping) {
            // Stop accepting and close what is idle; requests already begun finish.
            impl.stopping = true;
            ::epoll_ctl(impl.epoll_fd.get(), EPOLL_CTL_DEL, impl.listen_fd.get(), nullptr);
            while (!impl.idle_order.empty()) {
                auto found = impl.connections.find(impl.idle_order.front());
                if (found == impl.connections.end())
                    impl.idle_order.pop_front();
                else
                    impl.close_connection(*found->second);
            }
        }
        if (impl.stopping && impl.connections.empty() && impl.pending_requests == 0) break;
        int ready =
            ::epoll_wait(impl.epoll_fd.get(), events.data(), static_cast<int>(events.size()),
                         static_cast<int>(k_tick_interval.count()));
        for (int i = 0; i < ready; ++i) {
            const auto& event = events[static_cast<std::size_t>(i)];
            if (event.data.u64 == k_listen_tag) {
                if (!impl.stopping) impl.accept_all();
                continue;
            }
            if (event.data.u64 == k_wake_tag) {
                impl.finish_requests();
                continue;
            }
            auto found = impl.connections.find(event.data.u64);
            if (found == impl.connections.end()) continue;
            auto& connection = *found->second;
            if (connection.state == Connection::State::handling) {
                // The sender hung up while its request is in the handler:
                // stop watching, and close once the handler is done.
                ::epoll_ctl(impl.epoll_fd.get(), EPOLL_CTL_DEL, connection.fd, nullptr);
                connection.registered = false;
                connection.peer_gone = true;
                continue;
            }
            if (connection.state == Connection::State::writing) {
                if (event.events & (EPOLLERR | EPOLLHUP))
                    impl.close_connection(connection);
                else if (event.events & EPOLLOUT)
                    impl.flush(connection);
                continue;
            }
            impl.on_readable(connection);
        }
        auto now = Clock::now();
        if (impl.accept_paused_until && now >= *impl.accept_paused_until && !impl.stopping) {
            impl.accept_paused_until.reset();
            ::epoll_ctl(impl.epoll_fd.get(), EPOLL_CTL_ADD, impl.listen_fd.get(), &listen_event);
        }
        if (now - last_tick >= k_tick_interval) {
            last_tick = now;
            impl.check_deadlines();
            if (callbacks.tick) callbacks.tick();
        }
    }
    impl.stop_handlers();
    impl.listen_fd.reset();
}

} // namespace idem::net
