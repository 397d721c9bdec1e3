#include "idem/io/compressor.hpp"

#include "idem/util/errors.hpp"

#include <fmt/format.h>
#include <limits>
#include <zlib.h>
#include <zstd.h>

namespace idem::io {

namespace {

class GzipCompressor final : public Compressor {
public:
    GzipCompressor() {
        // 15 window bits plus 16: a gzip header and trailer, not zlib's.
        if (deflateInit2(&m_stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
                         Z_DEFAULT_STRATEGY) != Z_OK)
            throw FileSystemError("gzip: cannot start a compressor (out of memory?)");
    }
    ~GzipCompressor() override { deflateEnd(&m_stream); }
    GzipCompressor(const GzipCompressor&) = delete;
    GzipCompressor& operator=(const GzipCompressor&) = delete;

    void compress(std::string_view bytes, std::string& out) override {
        if (bytes.size() > std::numeric_limits<uInt>::max())
            throw FileSystemError("gzip: a chunk over 4 GiB cannot be one member");
        deflateReset(&m_stream);
        out.resize(deflateBound(&m_stream, static_cast<uLong>(bytes.size())));
        // zlib's interface is not const-correct: it never writes the input.
        m_stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
        m_stream.avail_in = static_cast<uInt>(bytes.size());
        m_stream.next_out = reinterpret_cast<Bytef*>(out.data());
        m_stream.avail_out = static_cast<uInt>(out.size());
        if (deflate(&m_stream, Z_FINISH) != Z_STREAM_END)
            throw FileSystemError("gzip: the compressor failed");
        out.resize(out.size() - m_stream.avail_out);
    }

private:
    z_stream m_stream{};
};

class ZstdCompressor final : public Compressor {
public:
    ZstdCompressor() : m_context(ZSTD_createCCtx()) {
        if (!m_context) throw FileSystemError("zstd: cannot start a compressor (out of memory?)");
    }
    ~ZstdCompressor() override { ZSTD_freeCCtx(m_context); }
    ZstdCompressor(const ZstdCompressor&) = delete;
    ZstdCompressor& operator=(const ZstdCompressor&) = delete;

    void compress(std::string_view bytes, std::string& out) override {
        out.resize(ZSTD_compressBound(bytes.size()));
        auto size = ZSTD_compressCCtx(m_context, out.data(), out.size(), bytes.data(), bytes.size(),
                                      ZSTD_CLEVEL_DEFAULT);
        if (ZSTD_isError(size))
            throw FileSystemError(fmt::format("zstd: {}", ZSTD_getErrorName(size)));
        out.resize(size);
    }

private:
    ZSTD_CCtx* m_context;
};

} // namespace

std::unique_ptr<Compressor> compressor_for(std::string_view path) {
    if (path.ends_with(".gz")) return std::make_unique<GzipCompressor>();
    if (path.ends_with(".zst")) return std::make_unique<ZstdCompressor>();
    return nullptr;
}

} // namespace idem::io
