#include "idem/run/stdin_copy.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <vector>

namespace idem::run {

StdinCopy::StdinCopy(const std::filesystem::path& directory) : m_directory(directory, "stdin") {
    auto path = m_directory.path() / "stdin";
    m_fd.reset(::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    auto failure = [&](std::string_view what) {
        return FileSystemError(fmt::format("cannot {} {} (a copy of standard input, to read it "
                                           "twice): {} (is the disk full? --spill-dir puts it "
                                           "elsewhere)",
                                           what, quote(path.string()), std::strerror(errno)));
    };
    if (!m_fd.valid()) throw failure("create");
    std::vector<char> buffer(1 << 20);
    for (;;) {
        auto got = ::read(STDIN_FILENO, buffer.data(), buffer.size());
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            throw FileSystemError(
                fmt::format("cannot read standard input: {}", std::strerror(errno)));
        if (got == 0) break;
        for (std::size_t written = 0; written < static_cast<std::size_t>(got);) {
            auto put = ::write(m_fd.get(), buffer.data() + written,
                               static_cast<std::size_t>(got) - written);
            if (put < 0 && errno == EINTR) continue;
            if (put < 0) throw failure("write to");
            written += static_cast<std::size_t>(put);
        }
    }
}

} // namespace idem::run
