// Appending capture lines from many threads, one write per line.

#include "idem/listen/capture.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace idem::listen {

CaptureFile::CaptureFile(const std::string& path) {
    if (path == "-") {
        m_fd = STDOUT_FILENO;
        m_name = "<stdout>";
        return;
    }
    m_owned_fd.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!m_owned_fd.valid())
        throw FileSystemError(
            fmt::format("cannot open capture {}: {}", quote(path), std::strerror(errno)));
    m_fd = m_owned_fd.get();
    m_name = path;
    m_compressor = io::compressor_for(path);
}

CaptureFile::~CaptureFile() = default;

bool CaptureFile::append_line(std::string_view line) {
    std::lock_guard lock(m_mutex);
    m_line.assign(line);
    m_line += '\n';
    if (m_compressor) {
        try {
            m_compressor->compress(m_line, m_compressed);
        } catch (const Error& error) {
            m_last_error = error.what();
            ++m_failed_writes;
            return false;
        }
        m_line.swap(m_compressed);
    }
    // A file's size before the write, to cut a partial line back off.
    off_t size_before = m_owned_fd.valid() ? ::lseek(m_fd, 0, SEEK_END) : -1;
    std::string_view rest = m_line;
    while (!rest.empty()) {
        auto written = ::write(m_fd, rest.data(), rest.size());
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) {
            m_last_error = written < 0 ? std::strerror(errno) : "nothing written";
            ++m_failed_writes;
            if (size_before >= 0 && rest.size() != m_line.size()) {
                if (::ftruncate(m_fd, size_before) != 0)
                    m_last_error += " (and cutting back failed)";
            }
            return false;
        }
        rest.remove_prefix(static_cast<std::size_t>(written));
    }
    return true;
}

void CaptureFile::sync() {
    std::lock_guard lock(m_mutex);
    struct stat info {};
    if (::fstat(m_fd, &info) != 0 || !S_ISREG(info.st_mode)) return;
    if (::fsync(m_fd) != 0)
        throw FileSystemError(
            fmt::format("cannot sync capture {}: {}", quote(m_name), std::strerror(errno)));
}

std::string CaptureFile::last_error() const {
    std::lock_guard lock(m_mutex);
    return m_last_error;
}

std::uint64_t CaptureFile::failed_writes() const {
    std::lock_guard lock(m_mutex);
    return m_failed_writes;
}

} // namespace idem::listen
