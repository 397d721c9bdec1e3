#pragma once
// Internal to net: HttpServer's state, shared by the file that runs its
// event loop and handler pool (http_server.cpp) and the one that reads,
// answers and closes connections (http_connections.cpp).

#include "idem/net/http_server.hpp"
#include "idem/util/time.hpp"
#include "idem/util/unique_fd.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <fmt/format.h>
#include <list>
#include <mutex>
#include <netinet/in.h>
#include <optional>
#include <string>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <unordered_map>
#include <vector>

namespace idem::net::detail {

using Clock = std::chrono::steady_clock;
// Every deadline of the server reads this clock, which IDEM_NOW moves in
// tests (docs/architecture.md, "Time").
inline Clock::time_point server_now() {
    return steady_now();
}

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

inline std::string describe_peer(const sockaddr_storage& address) {
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

inline std::string render_response(const Response& response, bool keep_alive, BodyWanted body) {
    std::string out =
        fmt::format("HTTP/1.1 {} {}\r\n", response.status, reason_phrase(response.status));
    for (const auto& [name, value] : response.headers)
        if (is_writable_header(name, value)) out += fmt::format("{}: {}\r\n", name, value);
    out += fmt::format("Content-Length: {}\r\n", response.body.size());
    out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
    if (body == BodyWanted::yes) out += response.body;
    return out;
}

inline Response error_response(int status, std::string_view reason) {
    Response response;
    response.status = status;
    response.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
    if (status == 503) response.headers.emplace_back("Retry-After", "1");
    response.body = fmt::format("{}\n", reason);
    return response;
}

// Lets this process hold as many connections as its hard limit allows:
// idle connections must cost descriptors, not refusals.
inline void raise_descriptor_limit() {
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

} // namespace idem::net::detail

namespace idem::net {

using detail::Clock;
using detail::Completion;
using detail::Connection;
using detail::Job;

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

} // namespace idem::net
