// The event loop and handler pool of HttpServer. One thread owns every
// descriptor (epoll, level-triggered); handler threads see only complete
// requests and hand their answers back through an eventfd.

#include "idem/net/http_server.hpp"

#include "idem/net/detail/http_server_impl.hpp"

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

using namespace detail;

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

    auto last_tick = server_now();
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
        auto now = server_now();
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
