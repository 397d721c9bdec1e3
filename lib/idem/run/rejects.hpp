#pragma once
// Where input that is not a record goes: its exact bytes to the reject file
// (--reject FILE) so it can be fixed and fed again, a warning with file, line
// and column to the diagnostics, and a count for the summary. Under --strict
// the first bad record ends the run with InputError instead.

#include "idem/io/block_reader.hpp"
#include "idem/io/diagnostics.hpp"
#include "idem/io/sink.hpp"
#include "idem/run/input.hpp"

#include <cstdint>
#include <mutex>
#include <string>

namespace idem::run {

enum class Strictness { lenient, strict };

class RejectRouter final : public io::OversizeHandler {
public:
    // `reject_sink` may be null (warnings and counts only).
    RejectRouter(io::Sink* reject_sink, Strictness strictness, io::Diagnostics& diagnostics,
                 std::uint64_t max_record_bytes);

    // Sets `record` aside: its bytes to the reject file, a warning, a count.
    // An oversized record's bytes went to the file as they were read (see
    // OversizeHandler); this reports it. Throws InputError under --strict.
    void reject(const InputRecord& record, std::uint64_t column, const std::string& message);
    void reject_oversized(const InputRecord& record);

    [[nodiscard]] std::uint64_t count() const {
        std::lock_guard lock(m_mutex);
        return m_count;
    }

    // OversizeHandler: streams a too-long line into the reject file.
    void begin(std::string_view source) override;
    void chunk(std::string_view bytes) override;
    void end() override;
    void abandon() override;

private:
    void report(SourcePosition position, const std::string& message);

    io::Sink* m_sink;
    Strictness m_strictness;
    io::Diagnostics& m_diagnostics;
    std::uint64_t m_max_record_bytes;
    std::uint64_t m_count = 0;
    // A line streamed by a read-ahead thread (begin to end) and a record
    // rejected by the calling thread share the reject file: one at a time,
    // and a streamed line whole.
    mutable std::mutex m_mutex;
    std::unique_lock<std::mutex> m_streaming{m_mutex, std::defer_lock};
};

} // namespace idem::run
