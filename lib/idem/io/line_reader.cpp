#include "idem/io/line_reader.hpp"

#include "idem/util/errors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

namespace idem::io {

namespace {
constexpr std::size_t k_initial_capacity = 1 << 20;
constexpr std::size_t k_min_read = 64 * 1024;

bool is_blank(std::string_view line) {
    return std::all_of(line.begin(), line.end(),
                       [](char c) { return c == ' ' || c == '\t' || c == '\r'; });
}
} // namespace

LineReader::LineReader(int fd, std::string source, std::uint64_t max_record_bytes,
                       OversizeHandler* oversize_handler)
    : m_fd(fd), m_source(std::move(source)), m_max_record_bytes(max_record_bytes),
      m_oversize_handler(oversize_handler) {
    m_capacity = k_initial_capacity;
    m_buffer = std::make_unique<char[]>(m_capacity + k_padding_bytes);
}

LineReader::~LineReader() = default;

bool LineReader::fill() {
    ensure_room();
    while (true) {
        auto got = ::read(m_fd, m_buffer.get() + m_end, m_capacity - m_end);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0)
            throw InputError({m_source, 0, 0, m_bytes_read},
                             fmt::format("cannot read: {}", std::strerror(errno)));
        if (got == 0) {
            m_eof = true;
            return false;
        }
        m_end += static_cast<std::size_t>(got);
        m_bytes_read += static_cast<std::uint64_t>(got);
        return true;
    }
}

// Makes room after m_end: first by moving the unconsumed bytes to the front,
// then by growing the buffer, but never beyond what one record may need.
void LineReader::ensure_room() {
    if (m_capacity - m_end >= k_min_read) return;
    if (m_begin > 0) {
        std::memmove(m_buffer.get(), m_buffer.get() + m_begin, m_end - m_begin);
        m_end -= m_begin;
        m_begin = 0;
    }
    if (m_capacity - m_end >= k_min_read) return;
    auto needed = std::max(m_capacity * 2, m_end + k_min_read);
    auto grown = std::make_unique<char[]>(needed + k_padding_bytes);
    std::memcpy(grown.get(), m_buffer.get(), m_end);
    m_buffer = std::move(grown);
    m_capacity = needed;
}

std::optional<RawLine> LineReader::next() {
    while (true) {
        const char* data = m_buffer.get();
        auto search_from = m_begin + m_scanned;
        const void* newline = search_from < m_end
                                  ? std::memchr(data + search_from, '\n', m_end - search_from)
                                  : nullptr;
        std::size_t line_end = 0;
        std::size_t consumed_end = 0;
        if (newline != nullptr) {
            line_end = static_cast<std::size_t>(static_cast<const char*>(newline) - data);
            consumed_end = line_end + 1;
        } else if (m_eof) {
            if (m_begin == m_end) return std::nullopt;
            line_end = m_end;
            consumed_end = m_end;
        } else {
            m_scanned = m_end - m_begin;
            if (m_scanned > m_max_record_bytes) return stream_oversized_line(m_scanned);
            fill();
            continue;
        }
        RawLine line;
        line.number = ++m_line_number;
        line.byte_offset = m_offset_of_begin;
        std::string_view bytes(data + m_begin, line_end - m_begin);
        if (!bytes.empty() && bytes.back() == '\r') bytes.remove_suffix(1);
        m_offset_of_begin += consumed_end - m_begin;
        m_begin = consumed_end;
        m_scanned = 0;
        if (bytes.size() > m_max_record_bytes) {
            if (m_oversize_handler) {
                m_oversize_handler->begin(m_source, line.number, line.byte_offset);
                m_oversize_handler->chunk(bytes);
                m_oversize_handler->end(bytes.size());
            }
            line.oversized_bytes = bytes.size();
            return line;
        }
        if (is_blank(bytes)) continue;
        line.bytes = bytes;
        return line;
    }
}

// The line has outgrown the limit without a newline: hand what is buffered to
// the handler and keep streaming until the newline, holding at most one read.
RawLine LineReader::stream_oversized_line(std::size_t scanned_bytes) {
    RawLine line;
    line.number = ++m_line_number;
    line.byte_offset = m_offset_of_begin;
    if (m_oversize_handler) m_oversize_handler->begin(m_source, line.number, line.byte_offset);
    std::uint64_t total = 0;
    auto emit = [&](std::size_t from, std::size_t to) {
        if (to > from && m_oversize_handler)
            m_oversize_handler->chunk(std::string_view(m_buffer.get() + from, to - from));
        total += to - from;
    };
    emit(m_begin, m_begin + scanned_bytes);
    m_begin += scanned_bytes;
    bool saw_newline = false;
    while (true) {
        if (m_begin == m_end) {
            m_begin = m_end = 0;
            if (!fill()) break;
        }
        const void* newline = std::memchr(m_buffer.get() + m_begin, '\n', m_end - m_begin);
        if (newline != nullptr) {
            auto position = static_cast<std::size_t>(static_cast<const char*>(newline) - m_buffer.get());
            emit(m_begin, position);
            m_begin = position + 1;
            saw_newline = true;
            break;
        }
        emit(m_begin, m_end);
        m_begin = m_end;
    }
    m_offset_of_begin += total + (saw_newline ? 1 : 0);
    m_scanned = 0;
    if (m_oversize_handler) m_oversize_handler->end(total);
    line.oversized_bytes = std::max<std::uint64_t>(total, 1);
    return line;
}

} // namespace idem::io
