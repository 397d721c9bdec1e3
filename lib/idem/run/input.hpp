#pragma once
// All of a command's inputs as one stream: NDJSON files (or "-" for stdin),
// or HAR 1.2 files whose entries become delivery envelopes. Read in blocks of
// whole lines (for pipelines that hand blocks to worker threads) or record by
// record; either way every record knows its file, line and byte offset.

#include "idem/io/block_reader.hpp"
#include "idem/record/field_path.hpp"
#include "idem/record/time_window.hpp"
#include "idem/run/input_format.hpp"
#include "idem/run/rows.hpp"
#include "idem/run/time_seek.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace idem::run {

inline constexpr std::uint64_t k_default_max_record_bytes = 16ULL << 20;
// A HAR or CSV file is one document, held whole to be read (a HAR is one
// JSON value; a CSV row may span lines inside quotes).
inline constexpr std::uint64_t k_max_document_bytes = 1ULL << 30;

struct InputOptions {
    std::vector<std::string> paths; // "-" is stdin; empty means stdin
    InputFormat format = InputFormat::ndjson;
    std::uint64_t max_record_bytes = k_default_max_record_bytes;
    // --allow-absent: paths the run may be given that no record holds
    // (PathCensus).
    std::vector<record::FieldPath> allow_absent;
    // --input-format csv: the character between fields (--csv-delimiter).
    char csv_delimiter = ',';
    CsvValues csv_values = CsvValues::text; // --csv-types: typed
    // --since/--until: each command's worker places a record's event time
    // in it; the run frame counts the ones outside (outside_range).
    record::TimeWindow window;
    // --sorted: each file is in event-time order, so a plain one is cut to
    // the window by binary search and the lines outside it are counted,
    // not read (time_seek.hpp). Compressed files and pipes are read whole.
    std::optional<TimeOrder> sorted;
    // A file holding what standard input held (stdin_copy.hpp), read from
    // its start in place of standard input and named "<stdin>" as it is;
    // -1: standard input itself.
    int stdin_fd = -1;
};

// A block of whole lines from one input. For HAR, one line per entry.
struct InputBlock {
    io::Block block;
    const std::string* source = nullptr;
    bool starts_source = false; // its first line is line 1 of `source`
    // Lines of `source` before this block that were skipped unread (a file
    // cut to --since/--until), blank ones too, for positions; and of them,
    // or after the file's last block, the records: each outside the window.
    std::uint64_t skipped_lines = 0;
    std::uint64_t skipped_records = 0;
};

// One record, for commands that go record by record.
struct InputRecord {
    std::string_view bytes; // followed by io::k_padding_bytes readable bytes
    const std::string* source = nullptr;
    std::uint64_t line = 0; // 1-based; for HAR: the entry number
    std::uint64_t byte_offset = 0;
    // Non-zero: longer than the limit. `bytes` is then the line when it was
    // held whole, or empty when it was streamed to the oversize handler.
    std::uint64_t oversized_bytes = 0;
};

// Turns block-relative positions into positions in the input, in order.
class PositionTracker {
public:
    void start_block(const InputBlock& block);
    // Position of a line of the current block.
    [[nodiscard]] InputRecord locate(const InputBlock& block, const io::BlockLine& line) const;
    // After the block's lines: the oversized line (if any), then move on.
    // Returns the oversized line's record (bytes empty) when there is one.
    std::optional<InputRecord> finish_block(const InputBlock& block, std::uint64_t lines_in_block);

private:
    std::uint64_t m_line_base = 0; // lines of this source before the block
};

class InputStream {
public:
    // Opens every input up front, so a missing file fails before any output.
    // Throws InputError naming the file.
    InputStream(const InputOptions& options, io::OversizeHandler* oversize_handler);
    ~InputStream();
    InputStream(const InputStream&) = delete;
    InputStream& operator=(const InputStream&) = delete;

    // The next block (about target_bytes of whole lines), or false after the
    // last input. Throws InputError when an input cannot be read or a HAR
    // file is not valid.
    bool next_block(InputBlock& block, std::size_t target_bytes);

    // Record by record, over next_block().
    std::optional<InputRecord> next();

    [[nodiscard]] std::uint64_t bytes_read() const;
    // Whether the first input is compressed in a format whose decoding is
    // a core's work of its own (gzip, xz, bzip2: slower than the parse it
    // feeds), told by its first bytes, none of them consumed. zstd decodes
    // at several times the parse's speed and is not.
    [[nodiscard]] bool decoding_takes_a_core() const;
    // The size of all inputs together, when every one is a regular file
    // (stdin redirected from a file counts): nullopt for pipes and terminals.
    [[nodiscard]] std::optional<std::uint64_t> total_bytes() const;
    // False when the next read would wait for a live writer: the time to
    // finish what was read so far, so nothing waits behind a quiet pipe.
    [[nodiscard]] bool ready() const;
    // The same, waiting up to `patience` for the writer.
    [[nodiscard]] bool ready(std::chrono::milliseconds patience) const;

private:
    struct Impl;
    std::unique_ptr<Impl> m_impl;
};

} // namespace idem::run
