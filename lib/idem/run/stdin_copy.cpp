#include "idem/run/stdin_copy.hpp"

#include "idem/util/errors.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>
#include <vector>

namespace idem::run {

StdinCopy::StdinCopy(const std::filesystem::path& directory)
    : m_directory(directory, "stdin"), m_file(m_directory.path() / "stdin") {
    std::vector<char> buffer(1 << 20);
    for (;;) {
        auto got = ::read(STDIN_FILENO, buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            throw FileSystemError(
                fmt::format("cannot read standard input: {}", std::strerror(errno)));
        if (got == 0) break;
        m_file.write(buffer.data(), static_cast<std::size_t>(got));
    }
    m_fd = m_file.flushed_descriptor();
}

} // namespace idem::run
