#pragma once
// The capture file of `idem listen`: one envelope line per request, written
// to the kernel before the request is answered, so that a request answered
// 2xx is in the file even when the process is killed right after. Safe to
// call from many connection threads. A name ending in .gz or .zst is
// written compressed (io/compressor.hpp), each line a whole member or
// frame of its own: a capture killed at any point, or appended to by a
// restarted listener, stays a stream every reader reads whole.

#include "idem/io/compressor.hpp"
#include "idem/util/unique_fd.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

namespace idem::listen {

class CaptureFile {
public:
    // "-" is stdout; any other path is opened for appending (created when
    // missing), so a restarted listener adds to the same capture. Throws
    // FileSystemError naming the path.
    explicit CaptureFile(const std::string& path);
    ~CaptureFile();
    CaptureFile(const CaptureFile&) = delete;
    CaptureFile& operator=(const CaptureFile&) = delete;

    // Writes `line` and a newline in one piece. Returns false (and keeps
    // the error for last_error()) when the bytes could not all be written;
    // a partial line is cut back off a file so the capture stays NDJSON.
    bool append_line(std::string_view line);

    // Pushes the file to disk (fsync); a no-op for a pipe or terminal.
    // Throws FileSystemError.
    void sync();

    [[nodiscard]] const std::string& name() const { return m_name; }
    [[nodiscard]] std::string last_error() const;
    [[nodiscard]] std::uint64_t failed_writes() const;

private:
    int m_fd = -1;
    UniqueFd m_owned_fd; // m_fd, when it is a file the capture opened
    std::string m_name;
    mutable std::mutex m_mutex;
    std::string m_line;
    std::unique_ptr<io::Compressor> m_compressor; // for a .gz or .zst name
    std::string m_compressed;
    std::string m_last_error;
    std::uint64_t m_failed_writes = 0;
};

} // namespace idem::listen
