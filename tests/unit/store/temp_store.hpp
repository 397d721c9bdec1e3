#pragma once
// A SQLite store file of the test's own in the temporary folder, with its
// WAL and shared-memory files and its saved index files, removed before and
// after.

#include <filesystem>
#include <string>
#include <unistd.h>
#include <vector>

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
        for (const auto& file : index_files())
            std::filesystem::remove(file);
    }
    // The saved index's files beside the store (<store>-index-<token>).
    std::vector<std::string> index_files() const {
        std::vector<std::string> files;
        std::filesystem::path store(path);
        auto prefix = store.filename().string() + "-index-";
        for (const auto& entry : std::filesystem::directory_iterator(store.parent_path()))
            if (entry.path().filename().string().rfind(prefix, 0) == 0)
                files.push_back(entry.path().string());
        return files;
    }
};

} // namespace idem::test
