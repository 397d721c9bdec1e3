#pragma once
// One owner for a file descriptor: closed when its owner goes, on every
// path, a throw included (a constructor that fails half-way leaks none).

#include <unistd.h>
#include <utility>

namespace idem {

class UniqueFd {
public:
    UniqueFd() = default;
    explicit UniqueFd(int fd) : m_fd(fd) {}
    ~UniqueFd() { reset(); }
    UniqueFd(UniqueFd&& other) noexcept : m_fd(std::exchange(other.m_fd, -1)) {}
    UniqueFd& operator=(UniqueFd&& other) noexcept {
        if (this != &other) reset(std::exchange(other.m_fd, -1));
        return *this;
    }
    UniqueFd(const UniqueFd&) = delete;
    UniqueFd& operator=(const UniqueFd&) = delete;

    [[nodiscard]] int get() const { return m_fd; }
    [[nodiscard]] bool valid() const { return m_fd >= 0; }
    // Closes the one held (if any) and holds `fd`.
    void reset(int fd = -1) {
        if (m_fd >= 0) ::close(m_fd);
        m_fd = fd;
    }
    // Closes it now; false when close() failed (for a file just written,
    // its last write error can show only here).
    [[nodiscard]] bool close() { return ::close(std::exchange(m_fd, -1)) == 0; }
    // Gives the descriptor up without closing it.
    [[nodiscard]] int release() { return std::exchange(m_fd, -1); }

private:
    int m_fd = -1;
};

} // namespace idem
