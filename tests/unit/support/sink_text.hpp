#pragma once
// What a piece of code writes through a file sink (io/sink.hpp), read back:
// for the tests of what renders into a Sink.

#include "idem/io/sink.hpp"

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <unistd.h>

namespace idem::test {

inline std::string written_through_sink(const std::function<void(io::Sink&)>& write) {
    static std::atomic<int> made{0};
    auto path = std::filesystem::temp_directory_path() /
                ("idem-sink-text-" + std::to_string(::getpid()) + "-" + std::to_string(made++));
    {
        auto sink = io::Sink::create_file(path.string());
        write(*sink);
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    std::filesystem::remove(path);
    return text.str();
}

} // namespace idem::test
