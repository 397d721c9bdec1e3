#pragma once
// The one spill engine: the files a command writes when what it holds would
// outgrow memory (audit's and reconcile's --spill-after), and reads back
// part by part. A run's files live in a fresh directory of their own,
// removed with them; every file is owned (closed on every path, a throw
// included), and every failure names the file and what to do about it.

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace idem::io {

class ByteBuffer;

// A spilled row's fixed-width fields, as the machine holds them: a spill
// file lives for one run on one machine. take_fixed() is false when `in`
// is too short (a file cut short).
template <typename Value> void put_fixed(std::string& out, const Value& value) {
    static_assert(std::is_trivially_copyable_v<Value>);
    out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

// A row's fixed-width fields packed on the stack, then appended in one go:
// each put() is a copy of a constant size, which the compiler inlines,
// where put_fixed()'s append is a call and a capacity check per field
// (most of what encoding a small row costs).
template <std::size_t Capacity> class PackedFields {
public:
    template <typename Value> PackedFields& put(const Value& value) {
        static_assert(std::is_trivially_copyable_v<Value>);
        if (sizeof value > Capacity - m_size) throw std::length_error("packed fields overflow");
        std::memcpy(m_bytes.data() + m_size, &value, sizeof value);
        m_size += sizeof value;
        return *this;
    }
    [[nodiscard]] std::string_view bytes() const { return {m_bytes.data(), m_size}; }

private:
    std::array<char, Capacity> m_bytes;
    std::size_t m_size = 0;
};

template <typename Value> bool take_fixed(std::string_view& in, Value& value) {
    static_assert(std::is_trivially_copyable_v<Value>);
    if (in.size() < sizeof value) return false;
    std::memcpy(&value, in.data(), sizeof value);
    in.remove_prefix(sizeof value);
    return true;
}

// How many descriptors the process may hold open (RLIMIT_NOFILE's soft
// limit; the largest number when there is none): spill files are held
// open while written, so how many a spill makes must fit.
[[nodiscard]] std::uint64_t open_files_limit();

// "idem-NAME-XXXXXX" under `parent`, made by mkdtemp: never a directory
// that was there before, whoever else writes to `parent`. Removed with
// everything in it when destroyed. Throws FileSystemError.
class SpillDirectory {
public:
    SpillDirectory(const std::filesystem::path& parent, std::string_view name);
    ~SpillDirectory();
    SpillDirectory(const SpillDirectory&) = delete;
    SpillDirectory& operator=(const SpillDirectory&) = delete;

    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }

private:
    std::filesystem::path m_path;
};

// A spill file's bytes mapped read-only, unmapped when destroyed: read
// back straight from the page cache, with no copy into a buffer that is
// first faulted in and cleared.
class MappedBytes {
public:
    MappedBytes() = default;
    ~MappedBytes();
    MappedBytes(MappedBytes&& other) noexcept;
    MappedBytes& operator=(MappedBytes&& other) noexcept;
    MappedBytes(const MappedBytes&) = delete;
    MappedBytes& operator=(const MappedBytes&) = delete;

    [[nodiscard]] std::string_view bytes() const {
        return {static_cast<const char*>(m_data), m_size};
    }

private:
    friend class SpillFile;
    MappedBytes(void* data, std::size_t size) : m_data(data), m_size(size) {}
    void* m_data = nullptr;
    std::size_t m_size = 0;
};

// One file, created empty in a SpillDirectory, written then read back by
// its owner alone.
class SpillFile {
public:
    // Throws FileSystemError.
    explicit SpillFile(std::filesystem::path path);

    // Throws FileSystemError (a full disk, say: --spill-dir puts the files
    // elsewhere).
    void write(const void* bytes, std::size_t size);
    void write(std::string_view bytes) { write(bytes.data(), bytes.size()); }

    // Everything written so far, mapped; valid while the result lives and
    // nothing more is written. Throws FileSystemError.
    [[nodiscard]] MappedBytes map_all();
    // Everything written so far, read into `into` (grown as needed, its
    // room kept for the next call); valid while `into` is not reused.
    // Throws FileSystemError.
    std::string_view read_all(ByteBuffer& into);
    // Everything written so far in pieces of `piece_bytes`, the last one
    // shorter; writing may go on afterwards, at the end.
    void read_pieces(const std::function<void(std::string_view)>& take,
                     std::size_t piece_bytes = 1 << 20);
    // Its disk space back once it is read for the last time.
    void truncate();
    // Everything written so far flushed, and the file's descriptor for a
    // reader that reads it by descriptor (still owned by this SpillFile;
    // nothing more is to be written). Throws FileSystemError.
    [[nodiscard]] int flushed_descriptor();

    [[nodiscard]] const std::filesystem::path& path() const { return m_path; }
    [[nodiscard]] std::uint64_t bytes_written() const { return m_bytes; }

private:
    [[nodiscard]] std::string failure(std::string_view what) const;

    struct Closer {
        void operator()(std::FILE* file) const { std::fclose(file); }
    };
    std::filesystem::path m_path;
    std::unique_ptr<std::FILE, Closer> m_file;
    std::uint64_t m_bytes = 0;
};

// `count` files "NAME-NN", appended to by partition, each through a write
// buffer of its own: one fwrite per small row (each taking the FILE's
// lock) costs a reading thread most of its time.
class SpillPartitions {
public:
    SpillPartitions(const SpillDirectory& directory, std::string_view name, std::size_t count);

    void append(std::size_t partition, std::string_view bytes);
    // The partition's file with everything appended to it.
    SpillFile& flushed(std::size_t partition);
    [[nodiscard]] std::size_t count() const { return m_files.size(); }
    [[nodiscard]] std::uint64_t bytes_written() const;

private:
    static constexpr std::size_t k_pending_bytes = 32 * 1024;
    std::vector<SpillFile> m_files;
    std::vector<std::string> m_pending;
};

} // namespace idem::io
