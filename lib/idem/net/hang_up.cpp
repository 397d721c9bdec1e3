#include "idem/net/hang_up.hpp"

#include "idem/util/unique_fd.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace idem::net {

namespace {

struct AddressList {
    addrinfo* first = nullptr;
    ~AddressList() {
        if (first) freeaddrinfo(first);
    }
};

// Connects within `timeout`; an invalid fd and the reason otherwise.
UniqueFd connect_to(const addrinfo& address, Duration timeout, std::string& why) {
    UniqueFd socket_fd(::socket(address.ai_family,
                                address.ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                                address.ai_protocol));
    if (!socket_fd.valid()) {
        why = std::strerror(errno);
        return socket_fd;
    }
    if (::connect(socket_fd.get(), address.ai_addr, address.ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            why = std::strerror(errno);
            return UniqueFd();
        }
        pollfd writable{socket_fd.get(), POLLOUT, 0};
        auto waited =
            ::poll(&writable, 1,
                   static_cast<int>(
                       std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count()));
        int error = 0;
        socklen_t size = sizeof error;
        if (waited <= 0) {
            why = "connection timed out";
            return UniqueFd();
        }
        ::getsockopt(socket_fd.get(), SOL_SOCKET, SO_ERROR, &error, &size);
        if (error != 0) {
            why = std::strerror(error);
            return UniqueFd();
        }
    }
    return socket_fd;
}

} // namespace

std::optional<std::string> hang_up_refused(const Target& target) {
    if (target.scheme == "http") return std::nullopt;
    return "a TLS connection cannot be dropped half-way: retry-after-drop needs an http:// target";
}

std::optional<std::string> send_and_hang_up(const Target& target, const OutgoingRequest& request,
                                            Duration connect_timeout) {
    if (auto refused = hang_up_refused(target)) return refused;
    auto host = target.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']')
        host = host.substr(1, host.size() - 2);
    auto port = target.port.empty() ? std::string("80") : target.port;
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    AddressList addresses;
    if (int failed = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &addresses.first))
        return fmt::format("cannot resolve {}: {}", host, gai_strerror(failed));
    std::string why = "no address";
    UniqueFd connection;
    for (auto* address = addresses.first; address && !connection.valid();
         address = address->ai_next)
        connection = connect_to(*address, connect_timeout, why);
    if (!connection.valid()) return why;
    std::string message = fmt::format("{} {}{} HTTP/1.1\r\nHost: {}{}\r\n", request.method,
                                      target.path.empty() ? "/" : target.path, target.query,
                                      target.host, target.port.empty() ? "" : ":" + target.port);
    for (const auto& [name, value] : request.headers)
        message += fmt::format("{}: {}\r\n", name, value);
    message += fmt::format("Content-Length: {}\r\nConnection: close\r\n\r\n", request.body.size());
    message += request.body;
    std::string_view left(message);
    auto deadline = std::chrono::steady_clock::now() + connect_timeout + std::chrono::seconds(5);
    while (!left.empty()) {
        auto sent = ::send(connection.get(), left.data(), left.size(), MSG_NOSIGNAL);
        if (sent > 0) {
            left.remove_prefix(static_cast<std::size_t>(sent));
            continue;
        }
        if (sent < 0 && errno == EINTR) continue;
        if (sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) &&
            std::chrono::steady_clock::now() < deadline) {
            pollfd writable{connection.get(), POLLOUT, 0};
            ::poll(&writable, 1, 100);
            continue;
        }
        return fmt::format("the request could not be sent whole: {}",
                           sent < 0 ? std::strerror(errno) : "the connection closed");
    }
    return std::nullopt; // closed here, before a byte of the answer is read
}

} // namespace idem::net
