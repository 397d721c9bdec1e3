#include "idem/store/sqlite/saved_slots_file.hpp"

#include "idem/util/unique_fd.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <random>
#include <string_view>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace idem::store::detail {
namespace {

// The header fills the file's first page, so the slots start on a page of
// their own and a slot's page is the file's.
constexpr std::size_t k_header_bytes = 4096;
constexpr char k_magic[8] = {'i', 'd', 'e', 'm', 's', 'l', 'o', 't'};
constexpr std::uint32_t k_format = 1;

struct Header {
    char magic[8];
    std::uint32_t format;
    std::uint32_t slot_bytes; // 8, little-endian words as the machine holds them
    SavedSlotsIdentity identity;
};

// The rows covered are not compared: the row's mark moves on past the
// file's when a process added only repeats since (its slots still hold
// every first copy up to the mark).
bool same_table(const SavedSlotsIdentity& a, const SavedSlotsIdentity& b) {
    return a.token == b.token && a.gc_generation == b.gc_generation && a.capacity == b.capacity &&
           a.entries == b.entries && a.base == b.base;
}

bool write_all_at(int fd, const char* bytes, std::size_t size, std::size_t offset) {
    while (size > 0) {
        auto written = ::pwrite(fd, bytes, std::min<std::size_t>(size, std::size_t{1} << 30),
                                static_cast<off_t>(offset));
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return false;
        bytes += written;
        size -= static_cast<std::size_t>(written);
        offset += static_cast<std::size_t>(written);
    }
    return true;
}

} // namespace

std::string saved_slots_path(const std::string& store_path, std::uint64_t token) {
    return fmt::format("{}-index-{:016x}", store_path, token);
}

std::uint64_t new_saved_slots_token() {
    std::random_device device;
    std::uint64_t token = 0;
    while (token == 0)
        token = (std::uint64_t{device()} << 32) ^ device();
    return token;
}

bool write_saved_slots(const std::string& store_path, const SavedSlotsIdentity& identity,
                       const std::function<bool(const FingerprintSlots::PutSlots&)>& fill) {
    auto path = saved_slots_path(store_path, identity.token);
    auto temporary = path + ".tmp";
    UniqueFd file(
        ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0666));
    if (!file.valid()) return false;
    int fd = file.get();
    char header_page[k_header_bytes] = {};
    Header header{};
    std::memcpy(header.magic, k_magic, sizeof k_magic);
    header.format = k_format;
    header.slot_bytes = sizeof(std::uint64_t);
    header.identity = identity;
    std::memcpy(header_page, &header, sizeof header);
    auto put = [&](std::size_t first, const std::uint64_t* words, std::size_t count) {
        return first + count <= identity.capacity &&
               write_all_at(fd, reinterpret_cast<const char*>(words), count * sizeof(std::uint64_t),
                            k_header_bytes + first * sizeof(std::uint64_t));
    };
    auto bytes = k_header_bytes + identity.capacity * sizeof(std::uint64_t);
    bool written = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0 &&
                   write_all_at(fd, header_page, sizeof header_page, 0) && fill(put) &&
                   ::fsync(fd) == 0;
    written = file.close() && written;
    if (!written || ::rename(temporary.c_str(), path.c_str()) != 0) {
        ::unlink(temporary.c_str());
        return false;
    }
    return true;
}

bool write_saved_slots(const std::string& store_path, const SavedSlotsIdentity& identity,
                       const std::uint64_t* slots) {
    return write_saved_slots(store_path, identity, [&](const FingerprintSlots::PutSlots& put) {
        return put(0, slots, identity.capacity);
    });
}

std::optional<SavedSlots> map_saved_slots(const std::string& store_path,
                                          const SavedSlotsIdentity& identity) {
    if (identity.capacity == 0 || (identity.capacity & (identity.capacity - 1)) != 0 ||
        identity.capacity > (std::uint64_t{1} << 32) ||
        identity.entries * 5 > identity.capacity * 4)
        return std::nullopt;
    auto path = saved_slots_path(store_path, identity.token);
    UniqueFd file(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!file.valid()) return std::nullopt;
    int fd = file.get();
    struct stat status {};
    auto bytes = k_header_bytes + identity.capacity * sizeof(std::uint64_t);
    Header header{};
    bool sound = ::fstat(fd, &status) == 0 && S_ISREG(status.st_mode) &&
                 static_cast<std::uint64_t>(status.st_size) == bytes &&
                 ::pread(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
                 std::memcmp(header.magic, k_magic, sizeof k_magic) == 0 &&
                 header.format == k_format && header.slot_bytes == sizeof(std::uint64_t) &&
                 same_table(header.identity, identity) &&
                 header.identity.covers_seq <= identity.covers_seq;
    void* pages = sound ? ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    file.reset(); // a mapping outlives its descriptor
    if (pages == MAP_FAILED) return std::nullopt;
    // Left to the kernel's read-ahead: a run's probes land all over the
    // slots, and when they are not in the page cache (after a reboot) most
    // of them are wanted soon; reading 4 KiB at a time would be slower.
    SavedSlots saved;
    saved.mapping = std::shared_ptr<const void>(
        pages, [bytes](const void* mapped) { ::munmap(const_cast<void*>(mapped), bytes); });
    saved.slots =
        reinterpret_cast<const std::uint64_t*>(static_cast<const char*>(pages) + k_header_bytes);
    saved.capacity = static_cast<std::size_t>(identity.capacity);
    saved.entries = static_cast<std::size_t>(identity.entries);
    saved.from_file = true;
    return saved;
}

void remove_saved_slots_except(const std::string& store_path,
                               const std::vector<std::uint64_t>& keep) {
    namespace fs = std::filesystem;
    fs::path store(store_path);
    auto prefix = store.filename().string() + "-index-";
    auto directory = store.has_parent_path() ? store.parent_path() : fs::path(".");
    std::error_code error;
    for (fs::directory_iterator entry(directory, error), end; !error && entry != end;
         entry.increment(error)) {
        auto name = entry->path().filename().string();
        if (name.size() < prefix.size() + 16 || name.compare(0, prefix.size(), prefix) != 0)
            continue;
        std::string_view rest(name);
        rest.remove_prefix(prefix.size());
        auto hex = rest.substr(0, 16);
        auto tail = rest.substr(16);
        if (!tail.empty() && tail != ".tmp") continue;
        if (hex.find_first_not_of("0123456789abcdef") != std::string_view::npos) continue;
        auto token = std::stoull(std::string(hex), nullptr, 16);
        if (tail.empty() && std::find(keep.begin(), keep.end(), token) != keep.end()) continue;
        std::error_code ignored;
        fs::remove(entry->path(), ignored);
    }
}

} // namespace idem::store::detail
