#include "idem/run/input_paths.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <glob.h>
#include <linux/magic.h>
#include <memory>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <system_error>
#include <unistd.h>

namespace idem::run {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& input, const std::string& why) {
    throw InputError({input, 0, 0, 0}, why);
}

struct FileIdentity {
    dev_t device;
    ino_t inode;
    bool operator==(const FileIdentity&) const = default;
};

std::string real_path_of(const std::string& path) {
    std::error_code error;
    auto real = fs::canonical(path, error);
    return error ? std::string() : real.string();
}

bool is_within(std::string_view path, std::string_view root) {
    if (root == "/") return true;
    return path == root || (path.starts_with(root) && path[root.size()] == '/');
}

// Trees whose files are the kernel's views, not logs: /proc/self/environ
// holds the process's secrets, /dev/zero never ends.
// A bind mount of one elsewhere is told by its file system.
bool is_system_tree(const std::string& real) {
    if (is_within(real, "/proc") || is_within(real, "/sys") || is_within(real, "/dev")) return true;
    struct statfs system {};
    if (::statfs(real.c_str(), &system) != 0) return false;
    return system.f_type == PROC_SUPER_MAGIC || system.f_type == SYSFS_MAGIC;
}

// One expansion's rules, and what it found.
class Expander {
public:
    Expander(const InputExpansion& expansion, ExpandedInputs& out)
        : m_expansion(expansion), m_out(out) {
        for (const auto& path : expansion.written) {
            struct stat status {};
            if (::stat(path.c_str(), &status) == 0 && S_ISREG(status.st_mode))
                m_written.push_back({status.st_dev, status.st_ino});
        }
    }

    void add(const std::string& input) {
        if (input == "-") {
            m_out.files.push_back(input);
            return;
        }
        std::error_code error;
        auto status = fs::status(input, error);
        if (!error && fs::is_directory(status)) {
            if (!m_expansion.recursive) {
                // "day/" and "day" suggest the same pattern, never "day//*".
                auto folder = input;
                while (folder.size() > 1 && folder.ends_with('/'))
                    folder.pop_back();
                fail(input, "is a directory: give --recursive to read the files under it, or a "
                            "quoted pattern such as " +
                                quote(folder + "/*.ndjson.gz"));
            }
            auto root = real_path_of(input);
            if (root.empty()) fail(input, "cannot resolve the directory's path");
            add_walked(input, root);
            return;
        }
        if (fs::exists(status) || !is_input_pattern(input)) {
            m_out.files.push_back(input); // a missing file fails when it is opened, naming it
            return;
        }
        add_pattern(input);
    }

private:
    // The files a walk of `directory` takes, sorted by path.
    void add_walked(const std::string& directory, const std::string& root) {
        std::vector<std::string> found;
        walk(directory, root, found);
        std::sort(found.begin(), found.end());
        m_out.files.insert(m_out.files.end(), found.begin(), found.end());
    }

    void skip(const std::string& path, std::string reason) {
        m_out.skipped.push_back({path, std::move(reason)});
    }

    // Every file under `directory`, hidden names (and hidden folders'
    // contents) left out; links to folders are not walked (a loop never
    // ends a walk), links to files are taken by `consider`.
    void walk(const std::string& directory, const std::string& root,
              std::vector<std::string>& found) {
        std::error_code error;
        fs::directory_iterator entries(directory, error);
        if (error) fail(directory, fmt::format("cannot read the directory: {}", error.message()));
        std::vector<std::pair<std::string, bool>> children; // path, is a folder
        for (auto end = fs::directory_iterator(); entries != end; entries.increment(error)) {
            if (error)
                fail(directory, fmt::format("cannot read the directory: {}", error.message()));
            const auto& entry = *entries;
            if (entry.path().filename().string().starts_with('.')) continue;
            auto link_status = entry.symlink_status(error);
            if (error)
                fail(entry.path().string(),
                     fmt::format("cannot read the file's status: {}", error.message()));
            children.emplace_back(entry.path().string(), fs::is_directory(link_status));
        }
        if (error) fail(directory, fmt::format("cannot read the directory: {}", error.message()));
        std::sort(children.begin(), children.end()); // warnings in path order, run to run
        for (const auto& [path, is_folder] : children) {
            if (is_folder)
                walk(path, root, found);
            else
                consider(path, root, found);
        }
    }

    // A path a walk or a pattern found: taken when it is a readable regular
    // file inside `root` that the run does not write.
    void consider(const std::string& path, const std::string& root,
                  std::vector<std::string>& found) {
        struct stat link {};
        if (::lstat(path.c_str(), &link) != 0)
            fail(path, fmt::format("cannot read the file's status: {}", std::strerror(errno)));
        auto real = real_path_of(path);
        if (real.empty()) {
            skip(path, "a link to nothing");
            return;
        }
        if (is_system_tree(real)) {
            skip(path, fmt::format("leads to {}, under /proc, /sys or /dev: name such a file on "
                                   "its own to read it",
                                   quote(real)));
            return;
        }
        if (!is_within(real, root) && m_expansion.links == LinkPolicy::stay_inside) {
            skip(path, fmt::format("a link out of {} to {} (--follow-links reads it)", quote(root),
                                   quote(real)));
            return;
        }
        struct stat target {};
        if (::stat(path.c_str(), &target) != 0)
            fail(path, fmt::format("cannot read the file's status: {}", std::strerror(errno)));
        if (S_ISDIR(target.st_mode)) {
            skip(path, "a link to a directory: not walked (name the directory itself)");
            return;
        }
        if (!S_ISREG(target.st_mode)) {
            skip(path, "not a regular file (a FIFO, a device or a socket): name it on its own "
                       "to read it");
            return;
        }
        if (std::find(m_written.begin(), m_written.end(),
                      FileIdentity{target.st_dev, target.st_ino}) != m_written.end()) {
            skip(path, "written by this run");
            return;
        }
        if (::access(path.c_str(), R_OK) != 0)
            fail(path, fmt::format("cannot read the file: {}", std::strerror(errno)));
        found.push_back(path);
    }

    void add_pattern(const std::string& pattern);

    const InputExpansion& m_expansion;
    ExpandedInputs& m_out;
    std::vector<FileIdentity> m_written;
};

// The folder a pattern cannot leave: its components before the first that
// holds a wildcard ("cap/*.ndjson": "cap"; "*.gz": ".").
std::string fixed_prefix(const std::string& pattern) {
    std::size_t end = 0;
    for (std::size_t start = 0; start <= pattern.size();) {
        auto slash = pattern.find('/', start);
        auto component =
            pattern.substr(start, slash == std::string::npos ? std::string::npos : slash - start);
        if (component.find_first_of("*?[") != std::string::npos) break;
        if (slash == std::string::npos) {
            end = pattern.size();
            break;
        }
        end = slash == 0 ? 1 : slash;
        start = slash + 1;
    }
    if (end == 0) return ".";
    return pattern.substr(0, end);
}

// glob(3)'s error callback has no context argument: the folder it could
// not read, for the message, kept per thread.
thread_local std::string t_unreadable_folder;

// A folder that is not there matches nothing; one that cannot be read
// ends the expansion (silently passing it over would read part of a day).
int note_unreadable_folder(const char* path, int error) {
    if (error == ENOENT || error == ENOTDIR) return 0;
    t_unreadable_folder = fmt::format("{}: {}", quote(path), std::strerror(error));
    return 1;
}

void Expander::add_pattern(const std::string& pattern) {
    glob_t matches{};
    t_unreadable_folder.clear();
    int result = ::glob(pattern.c_str(), 0, note_unreadable_folder, &matches);
    std::unique_ptr<glob_t, decltype(&::globfree)> owned(&matches, ::globfree);
    if (result == GLOB_ABORTED)
        fail(pattern, fmt::format("cannot read a directory the pattern walks: {}",
                                  t_unreadable_folder.empty() ? std::string("unknown")
                                                              : t_unreadable_folder));
    if (result == GLOB_NOMATCH || (result == 0 && matches.gl_pathc == 0))
        fail(pattern, "the pattern matches no file");
    if (result != 0) fail(pattern, "cannot expand the pattern: out of memory");
    auto root = real_path_of(fixed_prefix(pattern));
    if (root.empty()) fail(pattern, "cannot resolve the pattern's directory");
    // glob() sorts its matches (byte order: idem sets no locale).
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
        std::string match = matches.gl_pathv[i];
        std::error_code error;
        if (fs::is_directory(fs::symlink_status(match, error))) {
            if (!m_expansion.recursive) continue; // 'day/*' names files
            add_walked(match, root);
            continue;
        }
        consider(match, root, m_out.files);
    }
}

} // namespace

bool is_input_pattern(const std::string& input) {
    if (input.find_first_of("*?[") == std::string::npos) return false;
    std::error_code error;
    return !fs::exists(fs::symlink_status(input, error));
}

ExpandedInputs expand_inputs(const std::vector<std::string>& inputs,
                             const InputExpansion& expansion) {
    ExpandedInputs out;
    Expander expander(expansion, out);
    for (const auto& input : inputs)
        expander.add(input);
    return out;
}

} // namespace idem::run
