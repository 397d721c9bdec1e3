#include "idem/util/files.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/unique_fd.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

namespace idem {

std::string read_bounded_file(const std::string& path, std::string_view what,
                              std::uint64_t max_bytes) {
    UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!file.valid())
        throw UsageError(
            fmt::format("cannot read {} {}: {}", what, quote(path), std::strerror(errno)));
    struct stat status {};
    if (::fstat(file.get(), &status) == 0 && S_ISDIR(status.st_mode))
        throw UsageError(fmt::format("{} {} is a directory", what, quote(path)));
    std::string text;
    char buffer[64 * 1024];
    while (true) {
        auto got = ::read(file.get(), buffer, sizeof buffer);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            throw UsageError(
                fmt::format("cannot read {} {}: {}", what, quote(path), std::strerror(errno)));
        if (got == 0) return text;
        if (text.size() + static_cast<std::size_t>(got) > max_bytes)
            throw UsageError(fmt::format("{} {} is larger than {}, the most idem reads of one",
                                         what, quote(path), format_bytes(max_bytes)));
        text.append(buffer, static_cast<std::size_t>(got));
    }
}

} // namespace idem
