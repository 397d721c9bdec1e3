// The parse floor: what reading every record of an NDJSON file costs with
// nothing else done. Each of N threads takes a stretch of whole lines of the
// file (mapped), parses each line with simdjson's DOM parser and reads the
// key fields; no keys are hashed, nothing is written. Every benchmark that
// reads NDJSON prints its time as a fraction of this one on the same file
// and threads (a fraction near 1 is a command that costs what parsing
// costs).
//
//   parse_floor FILE [--threads N] [--keys data.object.id,type]
//
// Prints one JSON line: {"lines":..,"keys_found":..,"threads":..,"seconds":..}.
// Built with the benchmarks (make bench), never installed.

#include <simdjson.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <string_view>
#include <sys/mman.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

struct Counts {
    std::uint64_t lines = 0;
    std::uint64_t keys_found = 0;
    std::uint64_t failed = 0;
};

// "data.object.id" as the JSON Pointer "/data/object/id".
std::string pointer_of(std::string_view dotted) {
    std::string pointer;
    std::size_t start = 0;
    while (start <= dotted.size()) {
        auto dot = dotted.find('.', start);
        auto part = dotted.substr(start, dot == std::string_view::npos ? dotted.npos : dot - start);
        pointer += '/';
        pointer += part;
        if (dot == std::string_view::npos) break;
        start = dot + 1;
    }
    return pointer;
}

Counts parse_stretch(std::string_view text, const char* file_end,
                     const std::vector<std::string>& pointers) {
    Counts counts;
    simdjson::dom::parser parser;
    while (!text.empty()) {
        auto newline = text.find('\n');
        auto bytes = text.substr(0, newline);
        text.remove_prefix(newline == std::string_view::npos ? text.size() : newline + 1);
        if (bytes.empty()) continue;
        ++counts.lines;
        // In place: the mapped bytes after a line are its padding, as
        // idem's blocks are padded in place; the file's last lines, whose
        // padding would run past the mapping, are copied.
        bool padded = bytes.data() + bytes.size() + simdjson::SIMDJSON_PADDING <= file_end;
        simdjson::dom::element record;
        if (parser.parse(bytes.data(), bytes.size(), !padded).get(record) != simdjson::SUCCESS) {
            ++counts.failed;
            continue;
        }
        for (const auto& pointer : pointers) {
            simdjson::dom::element value;
            if (record.at_pointer(pointer).get(value) == simdjson::SUCCESS) ++counts.keys_found;
        }
    }
    return counts;
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: parse_floor FILE [--threads N] [--keys a.b,c]\n");
        return 2;
    }
    std::string path = argv[1];
    std::size_t threads = std::max(1U, std::thread::hardware_concurrency());
    std::string keys = "data.object.id,type";
    for (int i = 2; i + 1 < argc; i += 2) {
        std::string_view flag = argv[i];
        if (flag == "--threads")
            threads = static_cast<std::size_t>(std::max(1L, std::strtol(argv[i + 1], nullptr, 10)));
        else if (flag == "--keys")
            keys = argv[i + 1];
    }
    std::vector<std::string> pointers;
    for (std::size_t start = 0; start <= keys.size();) {
        auto comma = keys.find(',', start);
        pointers.push_back(pointer_of(std::string_view(keys).substr(
            start, comma == std::string::npos ? std::string::npos : comma - start)));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    auto started = std::chrono::steady_clock::now();
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat status {};
    if (fd < 0 || ::fstat(fd, &status) != 0) {
        std::perror(path.c_str());
        return 3;
    }
    auto size = static_cast<std::size_t>(status.st_size);
    const char* data =
        size == 0 ? ""
                  : static_cast<const char*>(::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0));
    if (data == MAP_FAILED) {
        std::perror("mmap");
        return 3;
    }
    std::string_view text(data, size);
    // Stretches of whole lines, one per thread.
    std::vector<std::string_view> stretches;
    std::size_t from = 0;
    for (std::size_t i = 0; i < threads && from < size; ++i) {
        auto to = i + 1 == threads ? size : std::max(from, size * (i + 1) / threads);
        if (to < size) {
            auto newline = text.find('\n', to);
            to = newline == std::string_view::npos ? size : newline + 1;
        }
        stretches.push_back(text.substr(from, to - from));
        from = to;
    }
    std::vector<Counts> counts(stretches.size());
    std::vector<std::thread> workers;
    for (std::size_t i = 0; i < stretches.size(); ++i)
        workers.emplace_back(
            [&, i] { counts[i] = parse_stretch(stretches[i], data + size, pointers); });
    for (auto& worker : workers)
        worker.join();
    Counts total;
    for (const auto& part : counts) {
        total.lines += part.lines;
        total.keys_found += part.keys_found;
        total.failed += part.failed;
    }
    auto seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    // The kernel simdjson chose (or SIMDJSON_FORCE_IMPLEMENTATION forced):
    // every figure names it.
    std::printf("{\"lines\":%llu,\"keys_found\":%llu,\"failed\":%llu,\"threads\":%zu,"
                "\"seconds\":%.3f,\"kernel\":\"%s\"}\n",
                static_cast<unsigned long long>(total.lines),
                static_cast<unsigned long long>(total.keys_found),
                static_cast<unsigned long long>(total.failed), threads, seconds,
                simdjson::get_active_implementation()->name().c_str());
    if (size > 0) ::munmap(const_cast<char*>(data), size);
    ::close(fd);
    return 0;
}
