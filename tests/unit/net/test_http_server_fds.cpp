// The server's constructor owns what it opened: when the event loop cannot
// start (no descriptor left for the eventfd), the socket and the epoll it
// already had are closed, not leaked.

#include "idem/net/http_server.hpp"
#include "idem/util/errors.hpp"

#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

int open_descriptors() {
    int count = 0;
    if (DIR* dir = ::opendir("/proc/self/fd")) {
        while (::readdir(dir))
            ++count;
        ::closedir(dir);
    }
    return count - 3; // ".", ".." and the directory's own
}

} // namespace

TEST_CASE("a server that cannot start its event loop leaks no descriptor") {
    // In a child: the limit is set where the socket and the epoll fit and
    // the eventfd does not (the hard limit too, so the constructor cannot
    // raise it), and the process exits with what it found.
    auto child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        auto before = open_descriptors();
        // The lowest limit below which exactly two descriptors are free.
        int limit_at = 0;
        for (int free = 0; free < 2; ++limit_at)
            if (::fcntl(limit_at, F_GETFD) == -1) ++free;
        rlimit limit{static_cast<rlim_t>(limit_at), static_cast<rlim_t>(limit_at)};
        if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) ::_exit(2);
        bool threw = false;
        try {
            idem::net::HttpServer server("127.0.0.1", 0, {});
        } catch (const idem::Error&) {
            threw = true;
        }
        ::_exit(threw && open_descriptors() == before ? 0 : 1);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
}
