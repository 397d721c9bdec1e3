#include "idem/run/rejects.hpp"

#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::run {

RejectRouter::RejectRouter(io::Sink* reject_sink, Strictness strictness,
                           io::Diagnostics& diagnostics, std::uint64_t max_record_bytes)
    : m_sink(reject_sink), m_strictness(strictness), m_diagnostics(diagnostics),
      m_max_record_bytes(max_record_bytes) {}

void RejectRouter::report(SourcePosition position, const std::string& message) {
    ++m_count;
    if (m_strictness == Strictness::strict) throw InputError(std::move(position), message);
    m_diagnostics.warning(position, message);
}

void RejectRouter::reject(const InputRecord& record, std::uint64_t column,
                          const std::string& message) {
    std::lock_guard lock(m_mutex);
    if (m_sink) {
        m_sink->write_record(record.bytes);
    }
    report({*record.source, record.line, column, record.byte_offset}, message);
}

void RejectRouter::reject_oversized(const InputRecord& record) {
    std::lock_guard lock(m_mutex);
    // A line that arrived whole in a block is still here; one that could not
    // be held was streamed to the file as it was read.
    if (m_sink && !record.bytes.empty()) {
        m_sink->write_record(record.bytes);
    }
    report({*record.source, record.line, 0, record.byte_offset},
           fmt::format("record of {} is larger than --max-record-size {}",
                       format_bytes(record.oversized_bytes), format_bytes(m_max_record_bytes)));
}

void RejectRouter::begin(std::string_view) {
    m_streaming.lock(); // until end()
}

void RejectRouter::chunk(std::string_view bytes) {
    if (m_sink) m_sink->write(bytes);
}

void RejectRouter::abandon() {
    m_streaming.unlock();
}

void RejectRouter::end() {
    if (m_sink) m_sink->write_record({}); // the line's end, after its streamed bytes
    m_streaming.unlock();
}

} // namespace idem::run
