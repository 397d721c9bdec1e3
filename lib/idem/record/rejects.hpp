#pragma once
// Where input that is not a record goes: its exact bytes to the reject file
// (--reject FILE) so it can be fixed and fed again, a warning with file, line
// and column to the diagnostics, and a count for the summary. Under --strict
// the first bad record ends the run with InputError instead.

#include "idem/io/diagnostics.hpp"
#include "idem/io/line_reader.hpp"
#include "idem/io/sink.hpp"
#include "idem/record/input.hpp"

#include <cstdint>
#include <string>

namespace idem::record {

enum class Strictness { lenient, strict };

class RejectRouter final : public io::OversizeHandler {
public:
    // `reject_sink` may be null (warnings and counts only).
    RejectRouter(io::Sink* reject_sink, Strictness strictness, io::Diagnostics& diagnostics,
                 std::uint64_t max_record_bytes);

    // Sets `record` aside. Throws InputError under --strict.
    void reject(const InputRecord& record, std::uint64_t column, const std::string& message);

    [[nodiscard]] std::uint64_t count() const { return m_count; }

    void begin(std::string_view source, std::uint64_t line_number, std::uint64_t byte_offset) override;
    void chunk(std::string_view bytes) override;
    void end(std::uint64_t total_bytes) override;

private:
    void report(SourcePosition position, const std::string& message);

    io::Sink* m_sink;
    Strictness m_strictness;
    io::Diagnostics& m_diagnostics;
    std::uint64_t m_max_record_bytes;
    std::uint64_t m_count = 0;
    SourcePosition m_oversized;
};

} // namespace idem::record
