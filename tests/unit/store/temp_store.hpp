#pragma once
// A SQLite store file of the test's own in the temporary folder, with its
// WAL and shared-memory files, removed before and after.

#include <filesystem>
#include <string>
#include <unistd.h>

namespace idem::test {

struct TempStore {
    std::string path;
    explicit TempStore(const std::string& name) {
        path = (std::filesystem::temp_directory_path() /
                ("idem-" + name + "-" + std::to_string(::getpid()) + ".db"))
                   .string();
        remove();
    }
    ~TempStore() { remove(); }
    TempStore(const TempStore&) = delete;
    TempStore& operator=(const TempStore&) = delete;
    void remove() {
        for (const char* suffix : {"", "-wal", "-shm"})
            std::filesystem::remove(path + suffix);
    }
};

} // namespace idem::test
