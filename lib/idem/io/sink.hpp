#pragma once
// Buffered byte sinks for stdout and output files. Records are written as the
// exact bytes that came in; a sink adds nothing of its own.

#include "idem/io/compressor.hpp"
#include "idem/util/unique_fd.hpp"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <sys/uio.h>

namespace idem::io {

// After a gather write of pieces[next..] wrote `written` bytes: the index of
// the first piece not wholly written, that piece trimmed to what is left.
std::size_t skip_written(std::vector<iovec>& pieces, std::size_t next, std::size_t written);

class Sink {
public:
    // Writes to stdout; does not close it.
    static std::unique_ptr<Sink> standard_output();
    // Creates or truncates `path`. Throws FileSystemError naming the path.
    static std::unique_ptr<Sink> create_file(const std::string& path);
    // create_file(), or null for no path (a side output not asked for).
    static std::unique_ptr<Sink> create_file_if_named(const std::string& path) {
        return path.empty() ? nullptr : create_file(path);
    }
    // Opens `path`, cuts it back to `committed_bytes` and appends from there
    // (resuming a run that was killed). Throws FileSystemError.
    static std::unique_ptr<Sink> resume_file(const std::string& path,
                                             std::uint64_t committed_bytes);
    // A file that appears at `path` whole or not at all (a report): written
    // beside it under a temporary name, and renamed over `path` by
    // publish(). Dropped unpublished (an error), the temporary file goes;
    // killed, a run leaves `path` as it was. Throws FileSystemError.
    static std::unique_ptr<Sink> replace_file(const std::string& path);
    // replace_file() for a file that must never be anything but a regular
    // file (--metrics, which a collector reads): a FIFO, a device or a
    // directory at `path` is refused (FileSystemError), never renamed over.
    static std::unique_ptr<Sink> replace_regular_file(const std::string& path);
    // replace_file(): flushes, syncs, and renames the file into place.
    void publish();

    ~Sink();
    Sink(const Sink&) = delete;
    Sink& operator=(const Sink&) = delete;

    void write(std::string_view bytes);
    // One record: its bytes, a newline, and a count for the summary.
    void write_record(std::string_view bytes) {
        write(bytes);
        write("\n");
        count_record();
    }
    // One record, `line` being its bytes and newline as they lie in the
    // caller's memory: written from there by a gather write, not copied.
    // That memory must stay unchanged until release_in_place() (or flush()),
    // which the caller calls before reusing it.
    void write_record_in_place(std::string_view line);
    // Writes out what write_record_in_place() points at, if anything.
    void release_in_place() {
        if (!m_pieces.empty()) flush();
    }
    // Pushes buffered bytes to the descriptor. Throws FileSystemError.
    void flush();
    // Flushes, then asks the kernel to put the bytes on disk (files only).
    void sync();

    [[nodiscard]] const std::string& name() const { return m_name; }
    [[nodiscard]] std::uint64_t records_written() const { return m_records; }
    // Bytes in the file so far, buffered ones included (from where it was
    // opened). A compressed file (io/compressor.hpp) counts what is flushed:
    // what it buffers has no compressed size until then.
    [[nodiscard]] std::uint64_t size() const {
        return m_compressor ? m_flushed_bytes : m_flushed_bytes + m_used + m_in_place_bytes;
    }
    void count_record() { ++m_records; }

private:
    Sink(int fd, std::string name);      // a descriptor the caller keeps (stdout)
    Sink(UniqueFd fd, std::string name); // a file the sink opened, closed with it
    void write_all(const char* data, std::size_t size);
    void write_pieces(std::vector<iovec>& pieces);
    void add_piece(const char* data, std::size_t size);
    void write_compressed(std::string_view bytes);

    int m_fd;
    UniqueFd m_owned_fd; // m_fd, when the sink opened it
    std::string m_name;
    std::string m_partial_path; // replace_file(): where it is written until published
    std::unique_ptr<char[]> m_buffer;
    std::size_t m_used = 0; // of m_buffer
    // Once a record is written in place, until the next flush: everything
    // not yet written, in order, as runs of m_buffer and the caller's
    // records. Empty otherwise, when m_buffer alone is what waits.
    std::vector<iovec> m_pieces;
    std::uint64_t m_in_place_bytes = 0;
    std::uint64_t m_flushed_bytes = 0;
    std::uint64_t m_records = 0;
    // A file named .gz or .zst: each flush writes one member or frame.
    std::unique_ptr<Compressor> m_compressor;
    std::string m_compressed;
};

} // namespace idem::io
