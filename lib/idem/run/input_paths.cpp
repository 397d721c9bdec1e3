#include "idem/run/input_paths.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <filesystem>
#include <fmt/format.h>
#include <glob.h>
#include <memory>
#include <system_error>

namespace idem::run {

namespace {

namespace fs = std::filesystem;

[[noreturn]] void fail(const std::string& input, const std::string& why) {
    throw InputError({input, 0, 0, 0}, why);
}

bool is_pattern(const std::string& input) {
    return input.find_first_of("*?[") != std::string::npos;
}

// The regular files under `directory`, hidden ones (and hidden
// directories' contents) left out, sorted by path.
void add_directory(const std::string& directory, std::vector<std::string>& files) {
    std::vector<std::string> found;
    std::error_code error;
    fs::recursive_directory_iterator walk(directory, error);
    if (error) fail(directory, fmt::format("cannot read the directory: {}", error.message()));
    for (auto end = fs::recursive_directory_iterator(); walk != end; walk.increment(error)) {
        if (error) fail(directory, fmt::format("cannot read the directory: {}", error.message()));
        const auto& entry = *walk;
        if (entry.path().filename().string().starts_with('.')) {
            if (entry.is_directory(error)) walk.disable_recursion_pending();
            continue;
        }
        if (entry.is_regular_file(error)) found.push_back(entry.path().string());
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
}

void add_input(const std::string& input, bool recursive, std::vector<std::string>& files);

void add_pattern(const std::string& pattern, bool recursive, std::vector<std::string>& files) {
    glob_t matches{};
    int result = ::glob(pattern.c_str(), 0, nullptr, &matches);
    std::unique_ptr<glob_t, decltype(&::globfree)> owned(&matches, ::globfree);
    if (result == GLOB_NOMATCH || (result == 0 && matches.gl_pathc == 0))
        fail(pattern, "the pattern matches no file");
    if (result != 0) fail(pattern, "cannot expand the pattern: out of memory");
    // glob() sorts its matches (byte order: idem sets no locale).
    for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
        std::string match = matches.gl_pathv[i];
        std::error_code error;
        if (fs::is_directory(match, error) && !recursive) continue; // 'day/*' names files
        add_input(match, recursive, files);
    }
}

void add_input(const std::string& input, bool recursive, std::vector<std::string>& files) {
    if (input == "-") {
        files.push_back(input);
        return;
    }
    std::error_code error;
    auto status = fs::status(input, error);
    if (!error && fs::is_directory(status)) {
        if (!recursive)
            fail(input, "is a directory: give --recursive to read the files under it, or a "
                        "quoted pattern such as " +
                            quote(input + "/*.ndjson.gz"));
        add_directory(input, files);
        return;
    }
    if (fs::exists(status) || !is_pattern(input)) {
        files.push_back(input); // a missing file fails when it is opened, naming it
        return;
    }
    add_pattern(input, recursive, files);
}

} // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& inputs, bool recursive) {
    std::vector<std::string> files;
    for (const auto& input : inputs)
        add_input(input, recursive, files);
    return files;
}

} // namespace idem::run
