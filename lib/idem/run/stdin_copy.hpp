#pragma once
// Standard input kept in a file, for a command that reads its records twice
// (audit reads the records of its groups again for their field-level
// differences and the fields learned as per-delivery): a pipe is read
// once, so its bytes go to a file in a fresh spill directory as they
// are, compressed or not, and every pass reads that file as "<stdin>".
// It costs the disk what standard input held, removed with the copy.

#include "idem/io/spill.hpp"

#include <filesystem>
#include <optional>

namespace idem::run {

class StdinCopy {
public:
    // Reads standard input to its end into a file under `directory`.
    // Throws FileSystemError (a full disk: --spill-dir puts it elsewhere).
    explicit StdinCopy(const std::filesystem::path& directory);

    // The copy, for InputOptions::stdin_fd: every InputStream reads it
    // from its start.
    [[nodiscard]] int fd() const { return m_fd; }

private:
    io::SpillDirectory m_directory;
    io::SpillFile m_file;
    int m_fd = -1; // m_file's, flushed
};

} // namespace idem::run
