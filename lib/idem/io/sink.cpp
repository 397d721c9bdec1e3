#include "idem/io/sink.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

namespace idem::io {

namespace {
constexpr std::size_t k_buffer_bytes = 1 << 20;

// A new file in `directory` named after `base` with a random part nobody
// can predict, made with O_EXCL | O_NOFOLLOW: a file or symlink planted
// under a name idem might pick is never opened, let alone truncated.
struct ExclusiveFile {
    UniqueFd fd;
    std::string path;
};
ExclusiveFile create_exclusive_beside(const std::string& directory, const std::string& base,
                                      std::string_view suffix) {
    constexpr int k_tries = 16;
    for (int attempt = 0; attempt < k_tries; ++attempt) {
        std::uint64_t random = 0;
        if (::getrandom(&random, sizeof random, 0) != static_cast<ssize_t>(sizeof random))
            throw FileSystemError(
                fmt::format("cannot make a temporary name: {}", std::strerror(errno)));
        auto path = fmt::format("{}.{}.{:016x}{}", directory, base, random, suffix);
        UniqueFd fd(
            ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
        if (fd.valid()) return {std::move(fd), std::move(path)};
        if (errno != EEXIST)
            throw FileSystemError(fmt::format("cannot create {} (beside {}): {}", quote(path),
                                              quote(directory + base), std::strerror(errno)));
    }
    throw FileSystemError(
        fmt::format("cannot create a temporary file beside {}", quote(directory + base)));
}
// At most this many pieces wait for one gather write (the kernel's IOV_MAX).
constexpr std::size_t k_most_pieces = 1024;

// A pipe written to holds a buffer's worth (Linux's default is 64 KiB):
// each write of a megabyte into a 64 KiB pipe waited on its reader some
// fifteen times, a switch between the two processes each (6% of a 1M-event
// audit whose report went through a pipe). Best effort: past the
// system's limit (/proc/sys/fs/pipe-max-size, or a user's quota of pipe
// pages) the pipe keeps the size it has.
void widen_if_pipe(int fd) {
    struct stat status {};
    if (::fstat(fd, &status) == 0 && S_ISFIFO(status.st_mode))
        (void)::fcntl(fd, F_SETPIPE_SZ, static_cast<int>(k_buffer_bytes));
}
} // namespace

Sink::Sink(int fd, std::string name)
    : m_fd(fd), m_name(std::move(name)), m_buffer(std::make_unique<char[]>(k_buffer_bytes)) {
    widen_if_pipe(m_fd);
}

Sink::Sink(UniqueFd fd, std::string name)
    : m_fd(fd.get()), m_owned_fd(std::move(fd)), m_name(std::move(name)),
      m_buffer(std::make_unique<char[]>(k_buffer_bytes)), m_compressor(compressor_for(m_name)) {
    widen_if_pipe(m_fd);
}

std::unique_ptr<Sink> Sink::standard_output() {
    return std::unique_ptr<Sink>(new Sink(STDOUT_FILENO, "<stdout>"));
}

std::unique_ptr<Sink> Sink::create_file(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid())
        throw FileSystemError(
            fmt::format("cannot create {}: {}", quote(path), std::strerror(errno)));
    return std::unique_ptr<Sink>(new Sink(std::move(fd), path));
}

std::unique_ptr<Sink> Sink::resume_file(const std::string& path, std::uint64_t committed_bytes) {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    if (!fd.valid())
        throw FileSystemError(fmt::format("cannot open {}: {}", quote(path), std::strerror(errno)));
    if (::ftruncate(fd.get(), static_cast<off_t>(committed_bytes)) != 0 ||
        ::lseek(fd.get(), static_cast<off_t>(committed_bytes), SEEK_SET) < 0) {
        int error = errno;
        throw FileSystemError(fmt::format("cannot cut {} back to {} bytes: {}", quote(path),
                                          committed_bytes, std::strerror(error)));
    }
    auto sink = std::unique_ptr<Sink>(new Sink(std::move(fd), path));
    sink->m_flushed_bytes = committed_bytes;
    return sink;
}

std::unique_ptr<Sink> Sink::replace_file(const std::string& path) {
    // A device or a pipe (-o /dev/stdout) cannot be replaced: written as it is.
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0 && !S_ISREG(status.st_mode)) return create_file(path);
    auto slash = path.rfind('/');
    auto directory = slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
    auto base = slash == std::string::npos ? path : path.substr(slash + 1);
    auto file = create_exclusive_beside(directory, base, ".partial");
    auto sink = std::unique_ptr<Sink>(new Sink(std::move(file.fd), path));
    sink->m_partial_path = std::move(file.path);
    return sink;
}

std::unique_ptr<Sink> Sink::replace_regular_file(const std::string& path) {
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0 && !S_ISREG(status.st_mode))
        throw FileSystemError(fmt::format("{} is not a regular file: it is replaced whole, so it "
                                          "must be a file or not exist yet",
                                          quote(path)));
    return replace_file(path);
}

void Sink::publish() {
    if (m_partial_path.empty()) return;
    sync();
    if (::rename(m_partial_path.c_str(), m_name.c_str()) != 0)
        throw FileSystemError(fmt::format("cannot rename {} to {}: {}", quote(m_partial_path),
                                          quote(m_name), std::strerror(errno)));
    m_partial_path.clear();
}

Sink::~Sink() {
    // Destructors cannot report failures; callers flush explicitly on the
    // success path so a write error is never lost silently. (Pieces written
    // in place were released by their writer before their memory went.)
    if (m_used > 0 || !m_pieces.empty()) {
        try {
            flush();
        } catch (...) {
        }
    }
    m_owned_fd.reset();
    if (!m_partial_path.empty()) ::unlink(m_partial_path.c_str());
}

void Sink::write(std::string_view bytes) {
    if (bytes.empty()) return; // an empty view may carry a null pointer, which memcpy must not see
    if (bytes.size() >= k_buffer_bytes) {
        flush();
        if (m_compressor)
            write_compressed(bytes);
        else
            write_all(bytes.data(), bytes.size());
        return;
    }
    if (k_buffer_bytes - m_used < bytes.size() || m_pieces.size() == k_most_pieces) flush();
    auto* at = m_buffer.get() + m_used;
    std::memcpy(at, bytes.data(), bytes.size());
    m_used += bytes.size();
    if (!m_pieces.empty()) add_piece(at, bytes.size());
}

void Sink::write_record_in_place(std::string_view line) {
    // Compressed, a record is copied into the chunk its member is made of.
    if (m_compressor) {
        write(line);
        count_record();
        return;
    }
    if (m_pieces.size() == k_most_pieces) flush();
    // What was buffered before goes out first.
    if (m_pieces.empty() && m_used > 0) add_piece(m_buffer.get(), m_used);
    add_piece(line.data(), line.size());
    m_in_place_bytes += line.size();
    count_record();
}

// A piece that starts where the last one ends extends it: consecutive
// records of one block go out as one.
void Sink::add_piece(const char* data, std::size_t size) {
    if (!m_pieces.empty()) {
        auto& last = m_pieces.back();
        if (static_cast<const char*>(last.iov_base) + last.iov_len == data) {
            last.iov_len += size;
            return;
        }
    }
    m_pieces.push_back({const_cast<char*>(data), size});
}

void Sink::flush() {
    // Emptied first: should the write fail, nothing is written twice later.
    auto used = m_used;
    m_used = 0;
    if (m_compressor) {
        if (used > 0) write_compressed({m_buffer.get(), used});
        return;
    }
    if (m_pieces.empty()) {
        write_all(m_buffer.get(), used);
        return;
    }
    std::vector<iovec> pieces;
    pieces.swap(m_pieces);
    m_in_place_bytes = 0;
    write_pieces(pieces);
    pieces.clear();
    if (m_pieces.empty()) m_pieces.swap(pieces); // keeps the capacity
}

void Sink::write_compressed(std::string_view bytes) {
    m_compressor->compress(bytes, m_compressed);
    write_all(m_compressed.data(), m_compressed.size());
}

void Sink::write_pieces(std::vector<iovec>& pieces) {
    std::size_t next = 0;
    while (next < pieces.size()) {
        auto count = static_cast<int>(std::min(pieces.size() - next, k_most_pieces));
        auto written = ::writev(m_fd, pieces.data() + next, count);
        if (written < 0 && errno == EINTR) continue;
        if (written < 0)
            throw FileSystemError(
                fmt::format("cannot write to {}: {}", quote(m_name), std::strerror(errno)));
        m_flushed_bytes += static_cast<std::uint64_t>(written);
        next = skip_written(pieces, next, static_cast<std::size_t>(written));
    }
}

std::size_t skip_written(std::vector<iovec>& pieces, std::size_t next, std::size_t written) {
    while (next < pieces.size() && written >= pieces[next].iov_len)
        written -= pieces[next++].iov_len;
    if (written > 0 && next < pieces.size()) {
        pieces[next].iov_base = static_cast<char*>(pieces[next].iov_base) + written;
        pieces[next].iov_len -= written;
    }
    return next;
}

void Sink::sync() {
    flush();
    // A device or a pipe (-o /dev/null) has nothing to put on disk: EINVAL.
    if (m_owned_fd.valid() && ::fsync(m_fd) != 0 && errno != EINVAL && errno != EROFS)
        throw FileSystemError(
            fmt::format("cannot sync {}: {}", quote(m_name), std::strerror(errno)));
}

void Sink::write_all(const char* data, std::size_t size) {
    while (size > 0) {
        auto written = ::write(m_fd, data, size);
        if (written < 0 && errno == EINTR) continue;
        if (written < 0)
            throw FileSystemError(
                fmt::format("cannot write to {}: {}", quote(m_name), std::strerror(errno)));
        data += written;
        size -= static_cast<std::size_t>(written);
        m_flushed_bytes += static_cast<std::uint64_t>(written);
    }
}

} // namespace idem::io
