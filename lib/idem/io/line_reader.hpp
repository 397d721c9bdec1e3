#pragma once
// Streams newline-delimited records from a file descriptor with one reused
// buffer: memory stays bounded by the largest record allowed, never by the
// input's length.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace idem::io {

// Every line handed out is followed in memory by at least this many readable
// bytes, so SIMD parsers can read past its end without copying it.
inline constexpr std::size_t k_padding_bytes = 64;

struct RawLine {
    std::string_view bytes;        // without the newline (and a trailing '\r')
    std::uint64_t number = 0;      // 1-based line number
    std::uint64_t byte_offset = 0; // offset of the line's first byte in the input
    // Non-zero when the line was longer than the record limit: bytes is empty,
    // and the line was streamed to the OversizeHandler instead of buffered.
    std::uint64_t oversized_bytes = 0;
};

// Receives a too-long line piece by piece, so it can be kept (in a reject
// file) without ever holding it whole in memory.
class OversizeHandler {
public:
    virtual ~OversizeHandler() = default;
    virtual void begin(std::string_view source, std::uint64_t line_number, std::uint64_t byte_offset) = 0;
    virtual void chunk(std::string_view bytes) = 0;
    virtual void end(std::uint64_t total_bytes) = 0;
};

class LineReader {
public:
    // Does not take ownership of fd. `source` names the input in messages.
    LineReader(int fd, std::string source, std::uint64_t max_record_bytes,
               OversizeHandler* oversize_handler);
    ~LineReader();
    LineReader(const LineReader&) = delete;
    LineReader& operator=(const LineReader&) = delete;

    // The next non-blank line, or nullopt at end of input. Throws InputError
    // when the descriptor cannot be read. The returned bytes stay valid until
    // the next call.
    std::optional<RawLine> next();

    [[nodiscard]] const std::string& source() const { return m_source; }
    [[nodiscard]] std::uint64_t bytes_read() const { return m_bytes_read; }

private:
    bool fill();
    void ensure_room();
    RawLine stream_oversized_line(std::size_t scanned_bytes);

    int m_fd;
    std::string m_source;
    std::uint64_t m_max_record_bytes;
    OversizeHandler* m_oversize_handler;
    std::unique_ptr<char[]> m_buffer;
    std::size_t m_capacity = 0; // usable bytes, padding excluded
    std::size_t m_begin = 0;    // first unconsumed byte
    std::size_t m_end = 0;      // one past the last byte read
    std::size_t m_scanned = 0;  // bytes after m_begin known to hold no newline
    bool m_eof = false;
    std::uint64_t m_line_number = 0;
    std::uint64_t m_offset_of_begin = 0;
    std::uint64_t m_bytes_read = 0;
};

} // namespace idem::io
