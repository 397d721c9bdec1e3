#include "idem/io/spill.hpp"

#include "idem/io/block_reader.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/text.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <utility>

namespace idem::io {

std::uint64_t open_files_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY)
        return std::numeric_limits<std::uint64_t>::max();
    return limit.rlim_cur;
}

SpillDirectory::SpillDirectory(const std::filesystem::path& parent, std::string_view name) {
    auto pattern = (parent / fmt::format("idem-{}-XXXXXX", name)).string();
    if (!::mkdtemp(pattern.data()))
        throw FileSystemError(fmt::format("cannot create a spill directory in {}: {}",
                                          quote(parent.string()), std::strerror(errno)));
    m_path = pattern;
}

SpillDirectory::~SpillDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(m_path, ignored);
}

SpillFile::SpillFile(std::filesystem::path path)
    : m_path(std::move(path)), m_file(std::fopen(m_path.c_str(), "w+b")) {
    if (!m_file)
        throw FileSystemError(fmt::format("cannot create the spill file {}: {}",
                                          quote(m_path.string()), std::strerror(errno)));
}

std::string SpillFile::failure(std::string_view what) const {
    return fmt::format("cannot {} the spill file {}: {} (is the disk full? --spill-dir puts "
                       "the spill files elsewhere)",
                       what, quote(m_path.string()), std::strerror(errno));
}

void SpillFile::write(const void* bytes, std::size_t size) {
    if (size == 0) return;
    if (std::fwrite(bytes, 1, size, m_file.get()) != size)
        throw FileSystemError(failure("write to"));
    m_bytes += size;
}

MappedBytes::~MappedBytes() {
    if (m_data) ::munmap(m_data, m_size);
}

MappedBytes::MappedBytes(MappedBytes&& other) noexcept
    : m_data(std::exchange(other.m_data, nullptr)), m_size(std::exchange(other.m_size, 0)) {}

MappedBytes& MappedBytes::operator=(MappedBytes&& other) noexcept {
    if (this != &other) {
        if (m_data) ::munmap(m_data, m_size);
        m_data = std::exchange(other.m_data, nullptr);
        m_size = std::exchange(other.m_size, 0);
    }
    return *this;
}

MappedBytes SpillFile::map_all() {
    if (std::fflush(m_file.get()) != 0) throw FileSystemError(failure("read back"));
    if (m_bytes == 0) return {};
    // Populated at once: every reader takes the whole file (a partition row
    // after row, audit's group file group by group for the report).
    void* data =
        ::mmap(nullptr, m_bytes, PROT_READ, MAP_PRIVATE | MAP_POPULATE, ::fileno(m_file.get()), 0);
    if (data == MAP_FAILED) throw FileSystemError(failure("map"));
    return {data, m_bytes};
}

std::string_view SpillFile::read_all(ByteBuffer& into) {
    if (std::fflush(m_file.get()) != 0) throw FileSystemError(failure("read back"));
    auto size = static_cast<std::size_t>(m_bytes);
    into.reserve(size, 0);
    for (std::size_t done = 0; done < size;) {
        auto got = ::pread(::fileno(m_file.get()), into.data() + done, size - done,
                           static_cast<off_t>(done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) throw FileSystemError(failure("read back"));
        done += static_cast<std::size_t>(got);
    }
    return {into.data(), size};
}

void SpillFile::read_pieces(const std::function<void(std::string_view)>& take,
                            std::size_t piece_bytes) {
    auto* file = m_file.get();
    if (std::fflush(file) != 0 || std::fseek(file, 0, SEEK_SET) != 0)
        throw FileSystemError(failure("read back"));
    // Read once per partition of a spill: huge pages (util/huge_pages.hpp).
    HugeVector<char> piece(piece_bytes);
    for (std::uint64_t left = m_bytes; left > 0;) {
        auto size = static_cast<std::size_t>(std::min<std::uint64_t>(left, piece_bytes));
        if (std::fread(piece.data(), 1, size, file) != size)
            throw FileSystemError(failure("read back"));
        left -= size;
        take(std::string_view(piece.data(), size));
    }
    if (std::fseek(file, 0, SEEK_END) != 0) throw FileSystemError(failure("read back"));
}

int SpillFile::flushed_descriptor() {
    if (std::fflush(m_file.get()) != 0) throw FileSystemError(failure("write to"));
    return ::fileno(m_file.get());
}

void SpillFile::truncate() {
    // Not fatal when it fails: the directory is removed at the end anyway.
    if (std::fflush(m_file.get()) == 0 && ::ftruncate(::fileno(m_file.get()), 0) == 0) {
        std::rewind(m_file.get());
        m_bytes = 0;
    }
}

SpillPartitions::SpillPartitions(const SpillDirectory& directory, std::string_view name,
                                 std::size_t count)
    : m_pending(count) {
    m_files.reserve(count);
    for (std::size_t i = 0; i < count; ++i)
        m_files.emplace_back(directory.path() / fmt::format("{}-{:02}", name, i));
}

void SpillPartitions::append(std::size_t partition, std::string_view bytes) {
    auto& pending = m_pending[partition];
    pending.append(bytes);
    if (pending.size() >= k_pending_bytes) {
        m_files[partition].write(pending);
        pending.clear();
    }
}

SpillFile& SpillPartitions::flushed(std::size_t partition) {
    auto& pending = m_pending[partition];
    m_files[partition].write(pending);
    std::string().swap(pending); // its buffer back: a partition is read once it is complete
    return m_files[partition];
}

std::uint64_t SpillPartitions::bytes_written() const {
    std::uint64_t bytes = 0;
    for (std::size_t i = 0; i < m_files.size(); ++i)
        bytes += m_files[i].bytes_written() + m_pending[i].size();
    return bytes;
}

} // namespace idem::io
