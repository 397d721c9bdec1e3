#pragma once
// An input's bytes as the record readers see them: decompressed when the
// input is compressed — gzip (every member, as `cat a.gz b.gz` makes),
// zstd (every frame), xz and bzip2 (every stream) — recognised by their
// first bytes, never by the file's name, on files and pipes alike.
// Decompression is Debian's zlib, libzstd, liblzma and libbz2.

#include <array>
#include <cstdint>
#include <memory>
#include <streambuf>
#include <string>
#include <string_view>

namespace idem::io {

enum class Compression { none, gzip, zstd, xz, bzip2 };

// What one decoder may hold, whatever a file's header claims: xz's
// dictionary (liblzma's memlimit) and zstd's window (2^27, libzstd's own
// default). `xz -9` needs 65 MiB and `zstd --long=27` 128 MiB; a larger
// claim is a damaged stream (docs/records.md, "Budgets").
inline constexpr std::uint64_t k_decoder_memory_bytes = 128ULL << 20;

// What the first bytes of an input say it is (none: read as it is).
[[nodiscard]] Compression compression_of(std::string_view first_bytes);
// The same for a file, read with pread(2) at offset 0 (nothing consumed);
// none when it cannot be read.
[[nodiscard]] Compression compression_of_file(int fd);
[[nodiscard]] std::string_view compression_name(Compression compression);

// A compressed stream that is cut short or corrupt. Thrown only once every
// byte decoded before the damage has been handed out.
class DamagedStream {
public:
    std::string what; // "gzip: the stream ends inside a member (cut short?)"
};

class ByteSource {
public:
    virtual ~ByteSource() = default;
    // Up to `capacity` bytes of the (decompressed) input, at least one
    // unless the input has ended (0). Throws InputError when the descriptor
    // cannot be read, DamagedStream as above.
    virtual std::size_t read(char* data, std::size_t capacity) = 0;
    [[nodiscard]] virtual Compression compression() const = 0;
    // Bytes read from the descriptor: of the compressed stream when there
    // is one (what a file's size measures progress against).
    [[nodiscard]] std::uint64_t raw_bytes_read() const { return m_raw_bytes; }
    // The bytes read before it was opened, to tell what the input is.
    void count_raw(std::uint64_t bytes) { m_raw_bytes += bytes; }

protected:
    std::uint64_t m_raw_bytes = 0;
};

// Reads the input's first bytes to tell what it is. Does not take ownership
// of `fd`; `source` names it in messages.
[[nodiscard]] std::unique_ptr<ByteSource> open_byte_source(int fd, const std::string& source);

// The next `length` bytes of `fd`, read as they are: a plain file cut to a
// time window (run/time_seek.hpp), its descriptor already at the cut's start.
[[nodiscard]] std::unique_ptr<ByteSource> open_plain_range(int fd, const std::string& source,
                                                           std::uint64_t length);

// `inner`, with `prefix` (the bytes already read from it, decompressed)
// handed out again first: for a reader that looked at an input's first
// bytes to tell its format.
[[nodiscard]] std::unique_ptr<ByteSource> with_prefix(std::unique_ptr<ByteSource> inner,
                                                      std::string prefix);

// A source's bytes as a std::istream reads them, a chunk at a time. A
// damaged compressed stream ends the input with InputError naming
// `source` and the `kind` of document ("CSV"), which the stream rethrows
// when told to (exceptions(std::ios::badbit)). Does not own `input`.
class ByteSourceStreambuf final : public std::streambuf {
public:
    ByteSourceStreambuf(ByteSource& input, std::string source, std::string_view kind);

protected:
    int_type underflow() override;

private:
    ByteSource& m_input;
    std::string m_source;
    std::string_view m_kind;
    std::array<char, 1 << 16> m_chunk{};
};

} // namespace idem::io
