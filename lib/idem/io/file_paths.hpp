#pragma once
// The one rule for the files a run names (docs/architecture.md, "The output
// layer"): no output is an input or another output. Files are compared by
// what they are (device and inode), a path not yet there by where it would
// be (its directory resolved, plus its name), never by spelling: `./in`,
// `in`, a symlink to it and a hard link of it are one file.

#include <optional>
#include <string>
#include <vector>

namespace idem::io {

// A path a run was given, and the flag that gave it ("inputs", "--reject").
struct NamedPath {
    std::string flag;
    std::string path;
};

// What a run writes to a path it names.
enum class OutputKind {
    // Written in place or replaced: a FIFO or a device (-o /dev/stdout)
    // is written as it is.
    any,
    // Replaced whole by a rename (--metrics): only a regular file, or a
    // path not yet there.
    regular_only,
};

struct NamedOutput {
    std::string flag;
    std::string path;
    OutputKind kind = OutputKind::any;
};

// Why the run must not start, or nullopt when every output is a file of its
// own. Only regular files and paths not yet there can clash: stdin ("-"),
// FIFOs and devices (/dev/null named twice, /dev/stdout) are not files
// idem could empty.
[[nodiscard]] std::optional<std::string> find_path_clash(const std::vector<NamedPath>& inputs,
                                                         const std::vector<NamedOutput>& outputs);

} // namespace idem::io
