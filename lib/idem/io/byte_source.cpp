#include "idem/io/byte_source.hpp"

#include "idem/util/errors.hpp"

#include <algorithm>
#include <array>
#include <bzlib.h>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <lzma.h>
#include <new>
#include <optional>
#include <unistd.h>
#include <vector>
#include <zlib.h>
#include <zstd.h>

namespace idem::io {

namespace {

struct Magic {
    Compression compression;
    std::string_view bytes;
};

// RFC 1952, RFC 8878, the .xz file format, bzip2's "BZh" and block size.
constexpr std::array<Magic, 4> k_magics{{
    {Compression::gzip, std::string_view("\x1f\x8b", 2)},
    {Compression::zstd, std::string_view("\x28\xb5\x2f\xfd", 4)},
    {Compression::xz, std::string_view("\xfd"
                                       "7zXZ\x00",
                                       6)},
    {Compression::bzip2, std::string_view("BZh", 3)},
}};

// RFC 8878 §3.1.2: a skippable frame's magic is 0x184D2A50-0x184D2A5F,
// little-endian. pzstd starts every file with one; the decoder passes it.
constexpr std::string_view k_skippable_frame_tail("\x2a\x4d\x18", 3);

bool starts_a_skippable_frame(std::string_view prefix) {
    if (prefix.empty()) return false;
    auto first = static_cast<unsigned char>(prefix.front());
    if (first < 0x50 || first > 0x5f) return false;
    auto tail = prefix.substr(1, k_skippable_frame_tail.size());
    return k_skippable_frame_tail.starts_with(tail);
}

// Whether more bytes could still make `prefix` a magic number.
bool could_be_magic(std::string_view prefix) {
    for (const auto& magic : k_magics)
        if (prefix.size() < magic.bytes.size() && magic.bytes.starts_with(prefix)) return true;
    return prefix.size() < 1 + k_skippable_frame_tail.size() && starts_a_skippable_frame(prefix);
}

// The descriptor's bytes, the ones read to tell the format first.
class RawInput {
public:
    RawInput(int fd, std::string source, std::string first, std::uint64_t& counted)
        : m_fd(fd), m_source(std::move(source)), m_first(std::move(first)), m_counted(counted) {}

    std::size_t read(char* data, std::size_t capacity) {
        if (m_first_at < m_first.size()) {
            auto size = std::min(capacity, m_first.size() - m_first_at);
            std::memcpy(data, m_first.data() + m_first_at, size);
            m_first_at += size;
            return size;
        }
        while (true) {
            auto got = ::read(m_fd, data, capacity);
            if (got < 0 && errno == EINTR) continue;
            if (got < 0)
                throw InputError({m_source, 0, 0, m_counted},
                                 fmt::format("cannot read: {}", std::strerror(errno)));
            m_counted += static_cast<std::uint64_t>(got);
            return static_cast<std::size_t>(got);
        }
    }

    [[nodiscard]] const std::string& source() const { return m_source; }

private:
    int m_fd;
    std::string m_source;
    std::string m_first;
    std::size_t m_first_at = 0;
    std::uint64_t& m_counted;
};

class PlainSource final : public ByteSource {
public:
    PlainSource(int fd, const std::string& source, std::string first)
        : m_raw(fd, source, std::move(first), m_raw_bytes) {}
    std::size_t read(char* data, std::size_t capacity) override {
        return m_raw.read(data, capacity);
    }
    [[nodiscard]] Compression compression() const override { return Compression::none; }

private:
    RawInput m_raw;
};

class RangeSource final : public ByteSource {
public:
    RangeSource(int fd, const std::string& source, std::uint64_t length)
        : m_raw(fd, source, {}, m_raw_bytes), m_left(length) {}
    std::size_t read(char* data, std::size_t capacity) override {
        if (m_left == 0) return 0;
        auto got =
            m_raw.read(data, static_cast<std::size_t>(std::min<std::uint64_t>(capacity, m_left)));
        m_left -= got;
        return got;
    }
    [[nodiscard]] Compression compression() const override { return Compression::none; }

private:
    RawInput m_raw;
    std::uint64_t m_left;
};

// What one call of a codec did.
struct Step {
    std::size_t consumed = 0;
    std::size_t produced = 0;
    bool stream_end = false;     // a member, frame or stream ended here
    const char* error = nullptr; // the library's words
};

// zlib, gzip members only (window 15, +16).
class GzipCodec {
public:
    static constexpr const char* k_unit = "member";
    GzipCodec() {
        if (inflateInit2(&m_z, 15 + 16) != Z_OK) throw std::bad_alloc();
    }
    ~GzipCodec() { inflateEnd(&m_z); }
    GzipCodec(const GzipCodec&) = delete;
    GzipCodec& operator=(const GzipCodec&) = delete;

    Step step(const char* in, std::size_t in_size, char* out, std::size_t out_size, bool) {
        m_z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in));
        m_z.avail_in = static_cast<uInt>(in_size);
        m_z.next_out = reinterpret_cast<Bytef*>(out);
        m_z.avail_out = static_cast<uInt>(out_size);
        auto rc = inflate(&m_z, Z_NO_FLUSH);
        Step step{in_size - m_z.avail_in, out_size - m_z.avail_out, rc == Z_STREAM_END, nullptr};
        if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR)
            step.error = m_z.msg ? m_z.msg : "the data is corrupt";
        return step;
    }
    void restart() { inflateReset(&m_z); }

private:
    z_stream m_z{};
};

class ZstdCodec {
public:
    static constexpr const char* k_unit = "frame";
    ZstdCodec() : m_context(ZSTD_createDCtx()) {
        if (!m_context) throw std::bad_alloc();
        static_assert(k_decoder_memory_bytes == 1ULL << 27);
        ZSTD_DCtx_setParameter(m_context, ZSTD_d_windowLogMax, 27);
    }
    ~ZstdCodec() { ZSTD_freeDCtx(m_context); }
    ZstdCodec(const ZstdCodec&) = delete;
    ZstdCodec& operator=(const ZstdCodec&) = delete;

    Step step(const char* in, std::size_t in_size, char* out, std::size_t out_size, bool) {
        ZSTD_inBuffer input{in, in_size, 0};
        ZSTD_outBuffer output{out, out_size, 0};
        auto rc = ZSTD_decompressStream(m_context, &output, &input);
        Step step{input.pos, output.pos, false, nullptr};
        if (ZSTD_isError(rc))
            step.error = ZSTD_getErrorName(rc);
        else
            step.stream_end = rc == 0 && (input.pos > 0 || output.pos > 0);
        return step;
    }
    void restart() {} // the next frame follows by itself

private:
    ZSTD_DCtx* m_context;
};

// Every .xz stream of the input (LZMA_CONCATENATED), as `cat a.xz b.xz`.
class XzCodec {
public:
    static constexpr const char* k_unit = "stream";
    XzCodec() {
        if (lzma_stream_decoder(&m_stream, k_decoder_memory_bytes, LZMA_CONCATENATED) != LZMA_OK)
            throw std::bad_alloc();
    }
    ~XzCodec() { lzma_end(&m_stream); }
    XzCodec(const XzCodec&) = delete;
    XzCodec& operator=(const XzCodec&) = delete;

    Step step(const char* in, std::size_t in_size, char* out, std::size_t out_size,
              bool input_ended) {
        m_stream.next_in = reinterpret_cast<const std::uint8_t*>(in);
        m_stream.avail_in = in_size;
        m_stream.next_out = reinterpret_cast<std::uint8_t*>(out);
        m_stream.avail_out = out_size;
        auto rc = lzma_code(&m_stream, input_ended ? LZMA_FINISH : LZMA_RUN);
        Step step{in_size - m_stream.avail_in, out_size - m_stream.avail_out, rc == LZMA_STREAM_END,
                  nullptr};
        if (rc == LZMA_BUF_ERROR && input_ended)
            step.error = "the stream ends inside a block (cut short?)";
        else if (rc != LZMA_OK && rc != LZMA_STREAM_END && rc != LZMA_BUF_ERROR)
            step.error = rc == LZMA_DATA_ERROR     ? "the data is corrupt"
                         : rc == LZMA_FORMAT_ERROR ? "not an .xz stream"
                         : rc == LZMA_MEMLIMIT_ERROR
                             ? "its dictionary needs more than the decoder's budget of 128 MiB "
                               "(docs/records.md, \"Budgets\")"
                         : rc == LZMA_MEM_ERROR ? "out of memory"
                                                : "cannot be decoded";
        return step;
    }
    void restart() {}

private:
    lzma_stream m_stream = LZMA_STREAM_INIT;
};

// Every bzip2 stream of the input, as pbzip2 and `cat a.bz2 b.bz2` make.
class Bzip2Codec {
public:
    static constexpr const char* k_unit = "stream";
    Bzip2Codec() { start(); }
    ~Bzip2Codec() { BZ2_bzDecompressEnd(&m_stream); }
    Bzip2Codec(const Bzip2Codec&) = delete;
    Bzip2Codec& operator=(const Bzip2Codec&) = delete;

    Step step(const char* in, std::size_t in_size, char* out, std::size_t out_size, bool) {
        m_stream.next_in = const_cast<char*>(in);
        m_stream.avail_in = static_cast<unsigned>(in_size);
        m_stream.next_out = out;
        m_stream.avail_out = static_cast<unsigned>(out_size);
        auto rc = BZ2_bzDecompress(&m_stream);
        Step step{in_size - m_stream.avail_in, out_size - m_stream.avail_out, rc == BZ_STREAM_END,
                  nullptr};
        if (rc != BZ_OK && rc != BZ_STREAM_END)
            step.error = rc == BZ_DATA_ERROR_MAGIC ? "not a bzip2 stream"
                         : rc == BZ_MEM_ERROR      ? "out of memory"
                                                   : "the data is corrupt";
        return step;
    }
    void restart() {
        BZ2_bzDecompressEnd(&m_stream);
        start();
    }

private:
    void start() {
        m_stream = bz_stream{};
        if (BZ2_bzDecompressInit(&m_stream, 0, 0) != BZ_OK) throw std::bad_alloc();
    }
    bz_stream m_stream{};
};

// The bytes of a compressed input, decoded as they are asked for: a read
// returns as soon as it has any, so a live pipe's lines are not held back.
template <typename Codec> class DecodingSource final : public ByteSource {
public:
    DecodingSource(int fd, const std::string& source, std::string first, Compression compression)
        : m_raw(fd, source, std::move(first), m_raw_bytes), m_compression(compression),
          m_input(k_input_bytes) {}

    std::size_t read(char* data, std::size_t capacity) override {
        if (m_damage) throw DamagedStream{*m_damage};
        while (true) {
            bool ended = m_eof && m_at == m_size;
            auto step = m_codec.step(m_input.data() + m_at, m_size - m_at, data, capacity, ended);
            m_at += step.consumed;
            if (step.consumed > 0) m_inside = true;
            if (step.error) return damaged(step.error, step.produced);
            if (step.stream_end) {
                m_inside = false;
                m_codec.restart();
            }
            if (step.produced > 0) return step.produced;
            if (step.stream_end && ended) return 0; // the last stream, finished
            if (step.stream_end || step.consumed > 0) continue;
            if (m_at < m_size) return damaged("the decoder makes no progress", 0);
            if (m_eof) {
                if (m_inside)
                    return damaged(
                        fmt::format("the stream ends inside a {} (cut short?)", Codec::k_unit), 0);
                return 0;
            }
            m_size = m_raw.read(m_input.data(), m_input.size());
            m_at = 0;
            m_eof = m_size == 0;
        }
    }

    [[nodiscard]] Compression compression() const override { return m_compression; }

private:
    static constexpr std::size_t k_input_bytes = 256 * 1024;

    // The damage is said once every byte decoded before it is handed out.
    std::size_t damaged(std::string_view what, std::size_t produced) {
        m_damage = fmt::format("{}: {}", compression_name(m_compression), what);
        if (produced > 0) return produced;
        throw DamagedStream{*m_damage};
    }

    RawInput m_raw;
    Compression m_compression;
    Codec m_codec;
    std::vector<char> m_input;
    std::size_t m_at = 0, m_size = 0;
    bool m_eof = false;
    bool m_inside = false; // bytes of a member, frame or stream not yet ended
    std::optional<std::string> m_damage;
};

} // namespace

Compression compression_of(std::string_view first_bytes) {
    if (first_bytes.size() >= 1 + k_skippable_frame_tail.size() &&
        starts_a_skippable_frame(first_bytes))
        return Compression::zstd;
    for (const auto& magic : k_magics)
        if (first_bytes.starts_with(magic.bytes)) {
            // "BZh" then the block size, 1 to 9: one more byte rules out text.
            if (magic.compression == Compression::bzip2 &&
                (first_bytes.size() < 4 || first_bytes[3] < '1' || first_bytes[3] > '9'))
                continue;
            return magic.compression;
        }
    return Compression::none;
}

Compression compression_of_file(int fd) {
    char first[8];
    auto got = ::pread(fd, first, sizeof first, 0);
    if (got <= 0) return Compression::none;
    return compression_of(std::string_view(first, static_cast<std::size_t>(got)));
}

std::string_view compression_name(Compression compression) {
    switch (compression) {
    case Compression::gzip:
        return "gzip";
    case Compression::zstd:
        return "zstd";
    case Compression::xz:
        return "xz";
    case Compression::bzip2:
        return "bzip2";
    case Compression::none:
        break;
    }
    return "none";
}

namespace {
class PrefixedSource final : public ByteSource {
public:
    PrefixedSource(std::unique_ptr<ByteSource> inner, std::string prefix)
        : m_inner(std::move(inner)), m_prefix(std::move(prefix)) {
        m_raw_bytes = m_inner->raw_bytes_read();
    }
    std::size_t read(char* data, std::size_t capacity) override {
        if (m_given < m_prefix.size()) {
            auto size = std::min(capacity, m_prefix.size() - m_given);
            std::memcpy(data, m_prefix.data() + m_given, size);
            m_given += size;
            if (m_given == m_prefix.size()) std::string().swap(m_prefix);
            if (m_prefix.empty()) m_given = 0;
            return size;
        }
        auto got = m_inner->read(data, capacity);
        m_raw_bytes = m_inner->raw_bytes_read();
        return got;
    }
    [[nodiscard]] Compression compression() const override { return m_inner->compression(); }

private:
    std::unique_ptr<ByteSource> m_inner;
    std::string m_prefix;
    std::size_t m_given = 0;
};
} // namespace

std::unique_ptr<ByteSource> open_plain_range(int fd, const std::string& source,
                                             std::uint64_t length) {
    return std::make_unique<RangeSource>(fd, source, length);
}

std::unique_ptr<ByteSource> with_prefix(std::unique_ptr<ByteSource> inner, std::string prefix) {
    if (prefix.empty()) return inner;
    return std::make_unique<PrefixedSource>(std::move(inner), std::move(prefix));
}

std::unique_ptr<ByteSource> open_byte_source(int fd, const std::string& source) {
    // As few bytes as tell the format: one, unless it starts like a magic
    // number (a live pipe's first line is not waited for).
    std::string first;
    std::uint64_t counted = 0;
    RawInput raw(fd, source, {}, counted);
    char byte[8];
    while (first.empty() || (could_be_magic(first) && first.size() < 6) ||
           (first.size() == 3 && first == "BZh")) {
        auto got = raw.read(byte, 1);
        if (got == 0) break;
        first.append(byte, got);
    }
    std::unique_ptr<ByteSource> opened;
    switch (compression_of(first)) {
    case Compression::gzip:
        opened = std::make_unique<DecodingSource<GzipCodec>>(fd, source, std::move(first),
                                                             Compression::gzip);
        break;
    case Compression::zstd:
        opened = std::make_unique<DecodingSource<ZstdCodec>>(fd, source, std::move(first),
                                                             Compression::zstd);
        break;
    case Compression::xz:
        opened = std::make_unique<DecodingSource<XzCodec>>(fd, source, std::move(first),
                                                           Compression::xz);
        break;
    case Compression::bzip2:
        opened = std::make_unique<DecodingSource<Bzip2Codec>>(fd, source, std::move(first),
                                                              Compression::bzip2);
        break;
    case Compression::none:
        opened = std::make_unique<PlainSource>(fd, source, std::move(first));
        break;
    }
    opened->count_raw(counted);
    return opened;
}

ByteSourceStreambuf::ByteSourceStreambuf(ByteSource& input, std::string source,
                                         std::string_view kind)
    : m_input(input), m_source(std::move(source)), m_kind(kind) {}

ByteSourceStreambuf::int_type ByteSourceStreambuf::underflow() {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    std::size_t got = 0;
    try {
        got = m_input.read(m_chunk.data(), m_chunk.size());
    } catch (const DamagedStream& damage) {
        throw InputError({m_source, 0, 0, 0},
                         fmt::format("{}: the {} document is incomplete", damage.what, m_kind));
    }
    if (got == 0) return traits_type::eof();
    setg(m_chunk.data(), m_chunk.data(), m_chunk.data() + got);
    return traits_type::to_int_type(*gptr());
}

} // namespace idem::io
