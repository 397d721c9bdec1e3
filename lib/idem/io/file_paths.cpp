#include "idem/io/file_paths.hpp"

#include "idem/util/text.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <fmt/format.h>
#include <sys/stat.h>
#include <variant>

namespace idem::io {

namespace {

struct FileIdentity {
    dev_t device;
    ino_t inode;
    bool operator==(const FileIdentity&) const = default;
};

// A path not yet there, by the directory it would be made in.
struct FutureFile {
    std::string resolved;
    bool operator==(const FutureFile&) const = default;
};

// Neither: stdin, a FIFO, a device, a directory, or a path whose directory
// does not exist (opening it fails with its own message).
struct NotAFile {
    bool operator==(const NotAFile&) const { return false; }
};

using Identity = std::variant<NotAFile, FileIdentity, FutureFile>;

Identity identity_of(const std::string& path) {
    if (path.empty() || path == "-") return NotAFile{};
    struct stat status {};
    if (::stat(path.c_str(), &status) == 0) {
        if (!S_ISREG(status.st_mode)) return NotAFile{};
        return FileIdentity{status.st_dev, status.st_ino};
    }
    if (errno != ENOENT) return NotAFile{};
    auto slash = path.rfind('/');
    auto directory = slash == std::string::npos ? std::string(".") : path.substr(0, slash + 1);
    auto name = slash == std::string::npos ? path : path.substr(slash + 1);
    char resolved[PATH_MAX];
    if (name.empty() || ::realpath(directory.c_str(), resolved) == nullptr) return NotAFile{};
    return FutureFile{fmt::format("{}/{}", resolved, name)};
}

bool same(const Identity& a, const Identity& b) {
    if (std::holds_alternative<NotAFile>(a) || std::holds_alternative<NotAFile>(b)) return false;
    return a == b;
}

std::string named(std::string_view flag, const std::string& path) {
    if (flag == "inputs") return fmt::format("the input {}", quote(path));
    return fmt::format("{} {}", flag, quote(path));
}

} // namespace

std::optional<std::string> find_path_clash(const std::vector<NamedPath>& inputs,
                                           const std::vector<NamedOutput>& outputs) {
    std::vector<Identity> read;
    read.reserve(inputs.size());
    for (const auto& input : inputs)
        read.push_back(identity_of(input.path));
    std::vector<Identity> written;
    written.reserve(outputs.size());
    for (const auto& output : outputs) {
        auto identity = identity_of(output.path);
        if (output.kind == OutputKind::regular_only && !output.path.empty()) {
            struct stat status {};
            if (::stat(output.path.c_str(), &status) == 0 && !S_ISREG(status.st_mode))
                return fmt::format("{} is not a regular file: it is replaced whole, so it must "
                                   "be a file or not exist yet",
                                   named(output.flag, output.path));
        }
        for (std::size_t i = 0; i < inputs.size(); ++i)
            if (same(identity, read[i]))
                return fmt::format("{} is {}: idem never writes over what it reads",
                                   named(output.flag, output.path),
                                   named(inputs[i].flag, inputs[i].path));
        for (std::size_t i = 0; i < written.size(); ++i)
            if (same(identity, written[i]))
                return fmt::format("{} is also {}: each output needs a file of its own",
                                   named(output.flag, output.path),
                                   named(outputs[i].flag, outputs[i].path));
        written.push_back(std::move(identity));
    }
    return std::nullopt;
}

} // namespace idem::io
