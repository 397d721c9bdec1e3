#include "idem/io/block_reader.hpp"

#include "idem/io/byte_source.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/huge_pages.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

namespace idem::io {

bool is_blank_line(std::string_view line) {
    return std::all_of(line.begin(), line.end(),
                       [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}

namespace {
constexpr std::size_t k_stream_chunk = 1 << 16;

// memchr is glibc's vector search; a counting loop stays a byte at a time
// at -O2 and was a fifth of a .zst run's reading thread.
std::uint64_t count_newlines(const char* data, std::size_t size) {
    std::uint64_t newlines = 0;
    const char* end = data + size;
    while (data < end) {
        auto* newline =
            static_cast<const char*>(std::memchr(data, '\n', static_cast<std::size_t>(end - data)));
        if (!newline) break;
        ++newlines;
        data = newline + 1;
    }
    return newlines;
}
} // namespace

void ByteRelease::operator()(char* data) const noexcept {
    if (mapped_bytes > 0)
        unmap_huge_pages(data, mapped_bytes);
    else
        std::default_delete<char[]>()(data);
}

void ByteBuffer::reserve(std::size_t bytes, std::size_t keep) {
    if (bytes <= m_capacity) return;
    auto grown = std::max(bytes, m_capacity + m_capacity / 2);
    std::unique_ptr<char[], ByteRelease> data;
    if (grown >= k_huge_from_bytes) {
        grown = whole_huge_pages(grown);
        data = {static_cast<char*>(map_huge_pages(grown)), ByteRelease{grown}};
    } else {
        data = {std::make_unique_for_overwrite<char[]>(grown).release(), ByteRelease{}};
    }
    if (keep > 0) std::memcpy(data.get(), m_data.get(), keep);
    m_data = std::move(data);
    m_capacity = grown;
}

std::optional<BlockLine> LineCursor::next() {
    while (m_position < m_lines.size()) {
        auto start = m_position;
        auto newline = m_lines.find('\n', start);
        auto end = newline == std::string_view::npos ? m_lines.size() : newline;
        m_position = newline == std::string_view::npos ? m_lines.size() : newline + 1;
        BlockLine line{m_lines.substr(start, end - start), start, m_index++,
                       newline != std::string_view::npos};
        // A CRLF line keeps its '\r' (JSON reads it as whitespace), so every
        // output writes the line back as it came: byte for byte means CRLF too.
        if (!is_blank_line(line.bytes)) return line;
    }
    return std::nullopt;
}

BlockReader::BlockReader(int fd, std::string source, std::uint64_t max_record_bytes,
                         OversizeHandler* oversize_handler)
    : BlockReader(nullptr, fd, std::move(source), max_record_bytes, oversize_handler) {}

BlockReader::BlockReader(std::unique_ptr<ByteSource> input, int fd, std::string source,
                         std::uint64_t max_record_bytes, OversizeHandler* oversize_handler)
    : m_fd(fd), m_source(std::move(source)), m_max_record_bytes(max_record_bytes),
      m_oversize_handler(oversize_handler) {
    // A pipe or terminal (tail -f | idem ...) hands over whole lines as soon
    // as they arrive; a file fills whole blocks, which is faster.
    struct stat status {};
    m_streaming = ::fstat(fd, &status) != 0 || !S_ISREG(status.st_mode);
    // A bigger pipe buffer means fewer, larger reads from a fast writer
    // (cat big.ndjson | idem ...); refused or capped, it changes nothing.
    if (m_streaming && S_ISFIFO(status.st_mode)) (void)::fcntl(fd, F_SETPIPE_SZ, 1 << 20);
    m_input = input ? std::move(input) : open_byte_source(fd, m_source);
    m_compressed = m_input->compression() != Compression::none;
}

BlockReader::~BlockReader() = default;

std::uint64_t BlockReader::bytes_read() const {
    return m_input->raw_bytes_read();
}

void BlockReader::throw_damage() const {
    throw InputError({m_source, m_lines, 0, m_offset},
                     fmt::format("{}: every line up to here was read, nothing after it", m_damage));
}

bool BlockReader::more_waiting(std::chrono::milliseconds patience) const {
    pollfd waiting{m_fd, POLLIN, 0};
    // A writer that has gone (POLLHUP) is ready too: the read returns the end.
    return ::poll(&waiting, 1, static_cast<int>(patience.count())) > 0 &&
           (waiting.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

// A compressed stream's damage ends the input here: m_damage says it.
std::size_t BlockReader::read_into(char* data, std::size_t capacity) {
    std::size_t got = 0;
    try {
        got = m_input->read(data, capacity);
    } catch (const DamagedStream& damage) {
        m_damage = damage.what;
    }
    if (got == 0) m_eof = true;
    return got;
}

bool BlockReader::next(Block& block, std::size_t target_bytes) {
    if (!m_damage.empty()) throw_damage();
    block.oversized_line_bytes = 0;
    block.byte_offset = m_offset;
    // Start with the cut line from last time, then read behind it.
    auto& bytes = block.bytes;
    bytes.reserve(m_carry.size() + k_padding_bytes, 0);
    if (!m_carry.empty()) std::memcpy(bytes.data(), m_carry.data(), m_carry.size());
    std::size_t size = m_carry.size();
    m_carry.clear();
    // Only the bytes each read adds are searched, so a long line is not
    // rescanned per read. The carry is searched once: after an oversized
    // line it can hold whole lines.
    std::size_t line_start = 0; // start of the last (possibly partial) line
    auto last_newline = [&](std::size_t from) {
        return std::string_view(bytes.data() + from, size - from).rfind('\n');
    };
    if (auto found = last_newline(0); found != std::string_view::npos) line_start = found + 1;
    while (!m_eof && (size < target_bytes || line_start == 0)) {
        std::size_t want = std::max(target_bytes, size + k_stream_chunk) - size;
        bytes.reserve(size + want + k_padding_bytes, size);
        auto got = read_into(bytes.data() + size, want);
        auto before = size;
        size += got;
        if (auto found = last_newline(before); found != std::string_view::npos)
            line_start = before + found + 1;
        // A line that outgrows the limit is streamed away, never held whole.
        if (size - line_start > m_max_record_bytes) {
            block.oversized_line_bytes =
                stream_oversized(std::string_view(bytes.data() + line_start, size - line_start));
            size = line_start;
            break;
        }
        // Live input (tail -f | idem ...): hand over whole lines as soon as
        // nothing more is waiting, rather than wait to fill a block.
        if (m_streaming && line_start > 0 && !more_waiting()) break;
    }
    // Whole lines stay; the cut line waits for the next block. At the end of
    // the input the last line counts even without its newline.
    std::size_t kept = size;
    if (!m_damage.empty()) {
        // The cut line after the last whole one is never handed out.
        kept = line_start;
        m_carry.clear();
    } else if (block.oversized_line_bytes == 0 && !m_eof) {
        kept = line_start;
        m_carry.assign(bytes.data() + line_start, size - line_start);
    }
    block.size = kept;
    if (m_compressed) m_lines += count_newlines(bytes.data(), kept);
    std::memset(bytes.data() + kept, ' ', k_padding_bytes);
    m_offset = block.byte_offset + kept;
    if (block.oversized_line_bytes) m_offset += block.oversized_line_bytes + 1;
    if (kept == 0 && block.oversized_line_bytes == 0 && !m_damage.empty()) throw_damage();
    return kept > 0 || block.oversized_line_bytes > 0;
}

// Hands the too-long line to the handler: what is buffered, then the rest of
// the line read in small chunks. What follows its newline is kept as the
// start of the next block.
std::uint64_t BlockReader::stream_oversized(std::string_view buffered) {
    if (!m_oversize_handler) return stream_oversized_to(nullptr, buffered);
    m_oversize_handler->begin(m_source);
    try {
        auto total = stream_oversized_to(m_oversize_handler, buffered);
        m_oversize_handler->end();
        return total;
    } catch (...) {
        m_oversize_handler->abandon();
        throw;
    }
}

std::uint64_t BlockReader::stream_oversized_to(OversizeHandler* handler,
                                               std::string_view buffered) {
    if (handler) handler->chunk(buffered);
    std::uint64_t total = buffered.size();
    std::string chunk(k_stream_chunk, '\0');
    while (!m_eof) {
        auto got = read_into(chunk.data(), chunk.size());
        std::string_view piece(chunk.data(), got);
        auto newline = piece.find('\n');
        if (newline != std::string_view::npos) {
            if (handler) handler->chunk(piece.substr(0, newline));
            total += newline;
            m_carry.assign(piece.substr(newline + 1));
            break;
        }
        if (handler) handler->chunk(piece);
        total += got;
    }
    return total;
}

} // namespace idem::io
