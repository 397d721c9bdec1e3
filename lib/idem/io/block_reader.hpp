#pragma once
// Reads newline-delimited input in blocks of whole lines, straight into a
// buffer the caller owns and reuses: no per-line copy on the reading thread,
// and memory bounded by the block size plus the largest record allowed,
// never by the input's length. Blocks can be handed to other threads.

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace idem::io {

// Every line handed out is followed in memory by at least this many readable
// bytes, so SIMD parsers can read past its end without copying it.
inline constexpr std::size_t k_padding_bytes = 64;

// Receives a line too long to hold, piece by piece, so it can be kept (in a
// reject file) without ever being buffered whole.
class OversizeHandler {
public:
    virtual ~OversizeHandler() = default;
    virtual void begin(std::string_view source) = 0;
    virtual void chunk(std::string_view bytes) = 0;
    virtual void end() = 0;
    // Instead of end(): the line could not be read (or kept) to its end.
    virtual void abandon() {}
};

// Frees a ByteBuffer's bytes: from the heap, or `mapped_bytes` of huge pages.
struct ByteRelease {
    std::size_t mapped_bytes = 0;
    void operator()(char* data) const noexcept;
};

// Bytes that grow without being zero-filled first (a block is refilled by
// read(2) right after growing; clearing it would cost as much as the read).
// A block's worth (1 MiB or more) is whole huge pages (util/huge_pages.hpp):
// a run's dozen blocks in flight otherwise fault 256 times each when first
// filled.
class ByteBuffer {
public:
    [[nodiscard]] char* data() { return m_data.get(); }
    [[nodiscard]] const char* data() const { return m_data.get(); }
    [[nodiscard]] std::size_t capacity() const { return m_capacity; }
    // At least `bytes` of room, keeping the first `keep` bytes.
    void reserve(std::size_t bytes, std::size_t keep);

private:
    std::unique_ptr<char[], ByteRelease> m_data;
    std::size_t m_capacity = 0;
};

struct Block {
    ByteBuffer bytes;              // whole lines, then k_padding_bytes of padding
    std::size_t size = 0;          // bytes of lines, padding excluded
    std::uint64_t byte_offset = 0; // of bytes[0] within the input
    // Non-zero: a line of this many bytes, too long to hold, comes right
    // after the block's lines; it went to the OversizeHandler.
    std::uint64_t oversized_line_bytes = 0;

    [[nodiscard]] std::string_view lines() const { return {bytes.data(), size}; }
};

// A line of a block; `bytes` excludes the newline but keeps the '\r' of a
// CRLF line, so a record written back as bytes + "\n" is the line as it came.
// 32 bytes: workers keep one per record, tens of thousands per block.
struct BlockLine {
    std::string_view bytes;
    std::uint64_t byte_offset = 0; // within the block
    std::uint32_t index = 0;       // 0-based line index within the block
    // `bytes` is followed by "\n" in the block (not the end): the line can be
    // written out from the block as it lies, newline and all.
    bool newline_follows = false;
};

// Whether a line holds nothing but spaces, tabs and a CR: no record, skipped
// by LineCursor (and counted as none where lines are counted unread).
[[nodiscard]] bool is_blank_line(std::string_view line);

// Walks a block's non-blank lines; `lines_seen()` counts blank ones too.
class LineCursor {
public:
    explicit LineCursor(std::string_view lines) : m_lines(lines) {}
    std::optional<BlockLine> next();
    [[nodiscard]] std::uint64_t lines_seen() const { return m_index; }

private:
    std::string_view m_lines;
    std::size_t m_position = 0;
    std::uint32_t m_index = 0; // a block's lines are fewer than its bytes
};

class ByteSource;

class BlockReader {
public:
    // Does not take ownership of fd. `source` names the input in messages.
    // A compressed input is read decompressed (byte_source.hpp): offsets
    // and lines are the decompressed stream's.
    BlockReader(int fd, std::string source, std::uint64_t max_record_bytes,
                OversizeHandler* oversize_handler);
    // The same over `input`, already opened on `fd` (its first bytes read
    // and handed back, byte_source.hpp's with_prefix).
    BlockReader(std::unique_ptr<ByteSource> input, int fd, std::string source,
                std::uint64_t max_record_bytes, OversizeHandler* oversize_handler);
    ~BlockReader();
    BlockReader(const BlockReader&) = delete;
    BlockReader& operator=(const BlockReader&) = delete;

    // Fills `block` with about `target_bytes` of whole lines (more when one
    // line is longer). False when the input is exhausted and `block` holds
    // nothing. Throws InputError when the descriptor cannot be read, and
    // when a compressed stream is cut short or corrupt: once every whole
    // line before the damage is handed out, naming the last of them; the
    // cut line after it is never handed out.
    bool next(Block& block, std::size_t target_bytes);

    // The bytes read begin at `offset` of the input (a file cut to a time
    // window, run/time_seek.hpp): blocks' offsets count from there. Before
    // the first next().
    void start_at(std::uint64_t offset) { m_offset = offset; }

    [[nodiscard]] const std::string& source() const { return m_source; }
    // Of the descriptor: the compressed bytes of a compressed input.
    [[nodiscard]] std::uint64_t bytes_read() const;
    // False when reading on would wait for a live writer (a pipe or
    // terminal with nothing in it after `patience`); a file never waits.
    [[nodiscard]] bool ready(std::chrono::milliseconds patience) const {
        return !m_streaming || m_eof || more_waiting(patience);
    }

private:
    std::size_t read_into(char* data, std::size_t capacity);
    [[nodiscard]] bool
    more_waiting(std::chrono::milliseconds patience = std::chrono::milliseconds(0)) const;
    std::uint64_t stream_oversized(std::string_view buffered);
    std::uint64_t stream_oversized_to(OversizeHandler* handler, std::string_view buffered);

    [[noreturn]] void throw_damage() const;

    int m_fd;
    std::string m_source;
    std::unique_ptr<ByteSource> m_input;
    bool m_compressed = false;
    std::uint64_t m_lines = 0; // handed out so far, counted for a compressed input
    std::string m_damage;      // a compressed stream's damage, said at the next call
    std::uint64_t m_max_record_bytes;
    OversizeHandler* m_oversize_handler;
    std::string m_carry;        // the start of a line that the last block cut
    std::uint64_t m_offset = 0; // input offset of m_carry's first byte
    bool m_eof = false;
    bool m_streaming = false; // a pipe or terminal: hand over what arrived
};

} // namespace idem::io
