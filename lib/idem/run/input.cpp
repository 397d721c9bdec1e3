#include "idem/run/input.hpp"

#include "idem/io/byte_source.hpp"

#include "idem/record/har.hpp"
#include "idem/run/json_elements.hpp"
#include "idem/run/rows.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/unique_fd.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <fmt/format.h>
#include <sstream>
#include <stdexcept>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace idem::run {

void PositionTracker::start_block(const InputBlock& block) {
    if (block.starts_source) m_line_base = 0;
    m_line_base += block.skipped_lines;
}

InputRecord PositionTracker::locate(const InputBlock& block, const io::BlockLine& line) const {
    InputRecord record;
    record.bytes = line.bytes;
    record.source = block.source;
    record.line = m_line_base + line.index + 1;
    record.byte_offset = block.block.byte_offset + line.byte_offset;
    return record;
}

std::optional<InputRecord> PositionTracker::finish_block(const InputBlock& block,
                                                         std::uint64_t lines_in_block) {
    m_line_base += lines_in_block;
    if (block.block.oversized_line_bytes == 0) return std::nullopt;
    InputRecord record;
    record.source = block.source;
    record.line = ++m_line_base;
    record.byte_offset = block.block.byte_offset + block.block.size;
    record.oversized_bytes = block.block.oversized_line_bytes;
    return record;
}

namespace {
// One input. A regular file is opened when the stream reaches it and
// closed when it is done, so a run over thousands of files (a directory, a
// glob) holds one descriptor; anything else (a FIFO, a device) stays open
// from the start, since opening it twice would wait for a second writer.
struct OpenInput {
    std::string name;
    int fd = -1;
    UniqueFd owned;                    // fd, when the stream opened it (not stdin)
    bool regular = false;              // a regular file, opened when reached
    std::optional<InputFormat> format; // decided when reached
};
constexpr std::size_t k_record_block_bytes = 1 << 20;
} // namespace

struct InputStream::Impl {
    InputOptions options;
    io::OversizeHandler* oversize_handler = nullptr;
    std::vector<OpenInput> inputs;
    std::size_t current = 0;
    std::unique_ptr<io::BlockReader> reader;
    bool source_started = false;
    std::uint64_t finished_bytes = 0;
    // What bytes_read() answers: set after each block, so a calling thread
    // can ask while a read-ahead thread reads (read_ahead.hpp).
    std::atomic<std::uint64_t> bytes_so_far{0};
    // Record-by-record state.
    InputBlock block;
    std::optional<io::LineCursor> cursor;
    PositionTracker positions;
    bool block_finished = true;

    // The input's source, when telling its format opened it (its first
    // bytes are handed out again).
    std::unique_ptr<io::ByteSource> opened;

    void decide_format(OpenInput& input);
    std::unique_ptr<io::ByteSource> take_source(const OpenInput& input);
    // A document read whole (HAR, CSV, JSON): bounded by k_max_document_bytes.
    std::string read_document(const OpenInput& input, std::string_view kind);
    void load_document(const OpenInput& input, InputBlock& out);
    void load_har(const OpenInput& input, InputBlock& out);
    // A CSV file, row by row (rows.hpp): the next block of about
    // `target_bytes`, false after its last row.
    bool next_csv_block(const OpenInput& input, InputBlock& out, std::size_t target_bytes);
    std::unique_ptr<io::ByteSource> csv_source;
    std::unique_ptr<std::streambuf> csv_buffer;
    std::unique_ptr<std::istream> csv_stream;
    std::optional<CsvRowReader> csv_rows;
    std::uint64_t csv_next_line = 1; // the line the next block's first line stands for
    // A JSON array or page, element by element (json_elements.hpp): the
    // next block of about `target_bytes`, false after the document's end.
    bool next_json_block(const OpenInput& input, InputBlock& out, std::size_t target_bytes);
    std::unique_ptr<io::ByteSource> json_source;
    std::optional<JsonElements> json_reader;
    std::string json_bytes; // read, not yet fed
    std::size_t json_at = 0;
    bool json_ended = false;
    // --sorted: the reader over the part of a plain file the window keeps,
    // `out` told of the lines before it; false when the file is not cut.
    bool start_cut(const OpenInput& input, InputBlock& out);
    std::uint64_t records_after_cut = 0; // said in a block of their own at the file's end
    std::uint64_t cut_file_bytes = 0;    // the cut file's size, for progress
    // A JSON or CSV input read to its end through `source`: its bytes
    // counted, the file closed, the stream on to the next input.
    void finish_streamed_document(OpenInput& input, const io::ByteSource& source) {
        finished_bytes += source.raw_bytes_read();
        bytes_so_far.store(finished_bytes, std::memory_order_relaxed);
        close(input);
        ++current;
        source_started = false;
    }
    void open(OpenInput& input);  // a regular file, when the stream reaches it
    void close(OpenInput& input); // ... and when it is done
};

InputStream::InputStream(const InputOptions& options, io::OversizeHandler* oversize_handler)
    : m_impl(std::make_unique<Impl>()) {
    m_impl->options = options;
    m_impl->oversize_handler = oversize_handler;
    auto paths = options.paths.empty() ? std::vector<std::string>{"-"} : options.paths;
    for (const auto& path : paths) {
        if (path == "-") {
            int fd = STDIN_FILENO;
            if (options.stdin_fd >= 0) {
                fd = options.stdin_fd;
                if (::lseek(fd, 0, SEEK_SET) != 0)
                    throw InputError({"<stdin>", 0, 0, 0},
                                     fmt::format("cannot read the copy of standard input again: {}",
                                                 std::strerror(errno)));
            }
            m_impl->inputs.push_back({"<stdin>", fd, UniqueFd(), false, std::nullopt});
            continue;
        }
        UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
        if (!fd.valid())
            throw InputError({path, 0, 0, 0}, fmt::format("cannot open: {}", std::strerror(errno)));
        struct stat status {};
        bool regular = ::fstat(fd.get(), &status) == 0 && S_ISREG(status.st_mode);
        if (regular) fd.reset(); // opened again when the stream reaches it
        int raw = fd.get();
        m_impl->inputs.push_back({path, raw, std::move(fd), regular, std::nullopt});
    }
}

InputStream::~InputStream() = default;

// --input-format, or what the input's first bytes say (input_format.hpp).
void InputStream::Impl::decide_format(OpenInput& input) {
    if (options.format != InputFormat::detect) {
        input.format = options.format;
        return;
    }
    auto source = io::open_byte_source(input.fd, input.name);
    std::string first;
    char chunk[1 << 12];
    // A file gives its first two lines at once; a pipe gives what has come,
    // and a live one (tail -f) may not send a second line for hours: there
    // the first whole line is told apart alone rather than held back.
    struct stat status {};
    bool file = ::fstat(input.fd, &status) == 0 && S_ISREG(status.st_mode);
    // Lines that hold something: a blank second line tells nothing.
    std::size_t lines_wanted = file ? 2 : 1, filled_lines = 0, scanned = 0;
    bool line_filled = false;
    auto enough = [&] {
        for (; scanned < first.size(); ++scanned) {
            char byte = first[scanned];
            if (byte == '\n') {
                filled_lines += line_filled ? 1 : 0;
                line_filled = false;
            } else if (byte != ' ' && byte != '\t' && byte != '\r') {
                line_filled = true;
            }
        }
        return filled_lines >= lines_wanted;
    };
    while (first.size() < k_detect_bytes && !enough()) {
        std::size_t got = 0;
        try {
            got = source->read(chunk, sizeof chunk);
        } catch (const io::DamagedStream& damage) {
            throw InputError({input.name, 1, 0, 0}, damage.what);
        }
        if (got == 0) break;
        first.append(chunk, got);
    }
    input.format = detect_input_format(first, options.csv_delimiter);
    opened = io::with_prefix(std::move(source), std::move(first));
}

std::unique_ptr<io::ByteSource> InputStream::Impl::take_source(const OpenInput& input) {
    if (opened) return std::move(opened);
    return io::open_byte_source(input.fd, input.name); // a .har.gz, a .csv.zst too
}

std::string InputStream::Impl::read_document(const OpenInput& input, std::string_view kind) {
    std::string document;
    char chunk[1 << 16];
    auto source = take_source(input);
    while (true) {
        std::size_t got = 0;
        try {
            got = source->read(chunk, sizeof chunk);
        } catch (const io::DamagedStream& damage) {
            throw InputError({input.name, 0, 0, 0},
                             fmt::format("{}: the {} document is incomplete", damage.what, kind));
        }
        if (got == 0) break;
        document.append(chunk, got);
        if (document.size() > k_max_document_bytes)
            throw InputError(
                {input.name, 0, 0, 0},
                fmt::format("{} file is larger than {}", kind, format_bytes(k_max_document_bytes)));
    }
    finished_bytes += document.size();
    return document;
}

namespace {
// `lines` as a block of its own, padded as the parsers need.
void hold_lines(const std::string& lines, InputBlock& out) {
    auto& bytes = out.block.bytes;
    bytes.reserve(lines.size() + io::k_padding_bytes, 0);
    std::memcpy(bytes.data(), lines.data(), lines.size());
    std::memset(bytes.data() + lines.size(), ' ', io::k_padding_bytes);
    out.block.size = lines.size();
    out.block.byte_offset = 0;
    out.block.oversized_line_bytes = 0;
}
} // namespace

void InputStream::Impl::load_document(const OpenInput& input, InputBlock& out) {
    switch (*input.format) {
    case InputFormat::har:
        return load_har(input, out);
    case InputFormat::csv:  // streamed: next_csv_block
    case InputFormat::json: // streamed: next_json_block
    case InputFormat::ndjson:
    case InputFormat::detect:
        break;
    }
    throw std::logic_error("load_document: not a document format");
}

bool InputStream::Impl::next_json_block(const OpenInput& input, InputBlock& out,
                                        std::size_t target_bytes) {
    if (!json_reader) {
        json_reader.emplace(input.name, options.max_record_bytes, oversize_handler);
        json_source = take_source(input);
        json_bytes.clear();
        json_at = 0;
        json_ended = false;
    }
    constexpr std::size_t k_read_bytes = 1 << 16;
    std::string lines;
    std::uint64_t oversized = 0;
    while (lines.size() < target_bytes && oversized == 0 && !json_ended) {
        if (json_at == json_bytes.size()) {
            json_bytes.resize(k_read_bytes);
            std::size_t got = 0;
            try {
                got = json_source->read(json_bytes.data(), json_bytes.size());
            } catch (const io::DamagedStream& damage) {
                throw InputError({input.name, 0, 0, 0},
                                 fmt::format("{}: the JSON document is incomplete", damage.what));
            }
            json_bytes.resize(got);
            json_at = 0;
            if (got == 0) {
                json_reader->finish();
                json_ended = true;
                break;
            }
        }
        auto fed = json_reader->feed(std::string_view(json_bytes).substr(json_at), lines);
        json_at += fed.consumed;
        oversized = fed.oversized_bytes;
    }
    bytes_so_far.store(finished_bytes + json_source->raw_bytes_read(), std::memory_order_relaxed);
    if (lines.empty() && oversized == 0) return false;
    hold_lines(lines, out);
    out.block.oversized_line_bytes = oversized;
    return true;
}

void InputStream::Impl::load_har(const OpenInput& input, InputBlock& out) {
    auto document = read_document(input, "HAR");
    std::string lines;
    for (const auto& envelope : record::har_to_envelopes(document, input.name)) {
        lines.append(envelope);
        lines.push_back('\n');
    }
    hold_lines(lines, out);
}

// Each row a JSON object of its header's names and its values (strings),
// at the line of the file it starts on: blank lines stand for the header
// and for the extra lines of quoted fields that hold newlines, so positions
// are the CSV file's own (orders.csv:12).
bool InputStream::Impl::next_csv_block(const OpenInput& input, InputBlock& out,
                                       std::size_t target_bytes) {
    if (!csv_rows) {
        csv_source = take_source(input);
        csv_buffer = std::make_unique<io::ByteSourceStreambuf>(*csv_source, input.name, "CSV");
        csv_stream = std::make_unique<std::istream>(csv_buffer.get());
        csv_stream->exceptions(std::ios::badbit);
        csv_rows.emplace(*csv_stream, input.name, options.csv_delimiter, options.csv_values,
                         options.max_record_bytes);
        csv_next_line = 1;
    }
    std::string lines, json;
    std::uint64_t line = 0;
    while (lines.size() < target_bytes && csv_rows->next(json, line)) {
        for (; csv_next_line < line; ++csv_next_line)
            lines.push_back('\n');
        lines.append(json);
        lines.push_back('\n');
        ++csv_next_line;
    }
    bytes_so_far.store(finished_bytes + csv_source->raw_bytes_read(), std::memory_order_relaxed);
    if (lines.empty()) return false;
    hold_lines(lines, out);
    return true;
}

void InputStream::Impl::open(OpenInput& input) {
    if (input.fd >= 0) return;
    input.owned.reset(::open(input.name.c_str(), O_RDONLY | O_CLOEXEC));
    if (!input.owned.valid())
        throw InputError({input.name, 0, 0, 0},
                         fmt::format("cannot open: {}", std::strerror(errno)));
    input.fd = input.owned.get();
}

void InputStream::Impl::close(OpenInput& input) {
    if (!input.regular) return;
    input.owned.reset();
    input.fd = -1;
}

bool InputStream::Impl::start_cut(const OpenInput& input, InputBlock& out) {
    if (!options.sorted || !options.window.active() || !input.regular) return false;
    struct stat status {};
    if (::fstat(input.fd, &status) != 0) return false;
    auto size = static_cast<std::uint64_t>(status.st_size);
    if (io::compression_of_file(input.fd) != io::Compression::none) return false;
    auto read_at = read_at_fd(input.fd, input.name);
    auto cut = cut_to_window(read_at, size, input.name, options.window, *options.sorted);
    if (!cut.cuts(size)) return false;
    opened.reset();
    if (::lseek(input.fd, static_cast<off_t>(cut.start), SEEK_SET) < 0)
        throw InputError({input.name, 0, 0, cut.start},
                         fmt::format("cannot seek: {}", std::strerror(errno)));
    reader = std::make_unique<io::BlockReader>(
        io::open_plain_range(input.fd, input.name, cut.end - cut.start), input.fd, input.name,
        options.max_record_bytes, oversize_handler);
    reader->start_at(cut.start);
    out.skipped_lines = cut.lines_before;
    out.skipped_records = cut.records_before;
    records_after_cut = cut.records_after;
    cut_file_bytes = size;
    return true;
}

bool InputStream::next_block(InputBlock& out, std::size_t target_bytes) {
    auto& impl = *m_impl;
    out.skipped_lines = 0;
    out.skipped_records = 0;
    while (impl.current < impl.inputs.size()) {
        auto& input = impl.inputs[impl.current];
        impl.open(input);
        out.source = &input.name;
        out.starts_source = !impl.source_started;
        impl.source_started = true;
        if (!input.format) impl.decide_format(input);
        if (*input.format == InputFormat::json) {
            if (impl.next_json_block(input, out, target_bytes)) return true;
            impl.finish_streamed_document(input, *impl.json_source);
            impl.json_reader.reset();
            impl.json_source.reset();
            std::string().swap(impl.json_bytes);
            continue;
        }
        if (*input.format == InputFormat::csv) {
            if (impl.next_csv_block(input, out, target_bytes)) return true;
            impl.finish_streamed_document(input, *impl.csv_source);
            impl.csv_rows.reset();
            impl.csv_stream.reset();
            impl.csv_buffer.reset();
            impl.csv_source.reset();
            continue;
        }
        if (*input.format != InputFormat::ndjson) {
            impl.load_document(input, out);
            impl.close(input);
            ++impl.current;
            impl.source_started = false;
            return true;
        }
        if (!impl.reader && !impl.start_cut(input, out))
            impl.reader = std::make_unique<io::BlockReader>(
                impl.take_source(input), input.fd, input.name, impl.options.max_record_bytes,
                impl.oversize_handler);
        if (impl.reader->next(out.block, target_bytes)) {
            impl.bytes_so_far.store(impl.finished_bytes + impl.reader->bytes_read(),
                                    std::memory_order_relaxed);
            return true;
        }
        if (impl.records_after_cut > 0 || out.skipped_records > 0) {
            // The lines after the cut (or a whole file before the window):
            // a block with no lines, only their count.
            out.skipped_records += std::exchange(impl.records_after_cut, 0);
            out.block.size = 0;
            out.block.oversized_line_bytes = 0;
            return true;
        }
        impl.finished_bytes += std::max(impl.reader->bytes_read(), impl.cut_file_bytes);
        impl.cut_file_bytes = 0;
        impl.bytes_so_far.store(impl.finished_bytes, std::memory_order_relaxed);
        impl.reader.reset();
        impl.close(input);
        impl.source_started = false;
        ++impl.current;
    }
    return false;
}

std::optional<InputRecord> InputStream::next() {
    auto& impl = *m_impl;
    while (true) {
        if (impl.cursor) {
            if (auto line = impl.cursor->next()) {
                auto record = impl.positions.locate(impl.block, *line);
                if (record.bytes.size() > impl.options.max_record_bytes)
                    record.oversized_bytes = record.bytes.size();
                return record;
            }
            auto lines = impl.cursor->lines_seen();
            impl.cursor.reset();
            if (auto oversized = impl.positions.finish_block(impl.block, lines)) return oversized;
        }
        if (!next_block(impl.block, k_record_block_bytes)) return std::nullopt;
        impl.positions.start_block(impl.block);
        impl.cursor.emplace(impl.block.block.lines());
    }
}

bool InputStream::ready() const {
    // A writer that keeps up with us answers well within this; one that has
    // gone quiet (tail -f) gets what it sent finished first.
    constexpr std::chrono::milliseconds k_patience{20};
    return ready(k_patience);
}

bool InputStream::ready(std::chrono::milliseconds patience) const {
    return !m_impl->reader || m_impl->reader->ready(patience);
}

bool InputStream::decoding_takes_a_core() const {
    if (m_impl->inputs.empty() || !m_impl->inputs.front().regular) return false;
    UniqueFd fd(::open(m_impl->inputs.front().name.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return false;
    auto compression = io::compression_of_file(fd.get());
    return compression != io::Compression::none && compression != io::Compression::zstd;
}

std::uint64_t InputStream::bytes_read() const {
    return m_impl->bytes_so_far.load(std::memory_order_relaxed);
}

std::optional<std::uint64_t> InputStream::total_bytes() const {
    std::uint64_t total = 0;
    for (const auto& input : m_impl->inputs) {
        // A regular file's descriptor comes and goes on the reading thread
        // (a read-ahead thread, while this is asked on another): it is
        // asked by name. Other inputs keep theirs from the start.
        struct stat status {};
        bool read = input.regular ? ::stat(input.name.c_str(), &status) == 0
                                  : ::fstat(input.fd, &status) == 0;
        if (!read || !S_ISREG(status.st_mode)) return std::nullopt;
        total += static_cast<std::uint64_t>(status.st_size);
    }
    return total;
}

} // namespace idem::run
