#include "idem/io/file_paths.hpp"
#include "idem/io/sink.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/files.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace idem;
using namespace idem::io;

namespace {

// A directory of its own, removed with what it holds.
struct TempDirectory {
    std::string path;
    TempDirectory() {
        char name[] = "/tmp/idem-paths-XXXXXX";
        REQUIRE(::mkdtemp(name) != nullptr);
        path = name;
    }
    ~TempDirectory() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    [[nodiscard]] std::string file(std::string_view name, std::string_view content = "") const {
        auto at = fmt::format("{}/{}", path, name);
        std::ofstream(at, std::ios::binary) << content;
        return at;
    }
};

std::string content_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream all;
    all << in.rdbuf();
    return all.str();
}

} // namespace

TEST_CASE("an output that is an input is found by what it is, not how it is spelled") {
    TempDirectory dir;
    auto input = dir.file("in.ndjson", "{}\n");
    REQUIRE(::symlink(input.c_str(), (dir.path + "/soft").c_str()) == 0);
    REQUIRE(::link(input.c_str(), (dir.path + "/hard").c_str()) == 0);
    for (auto spelled :
         {input, dir.path + "/./in.ndjson", dir.path + "/soft", dir.path + "/hard"}) {
        auto clash = find_path_clash({{"inputs", input}}, {{"--reject", spelled}});
        REQUIRE(clash);
        CHECK(clash->find("--reject") != std::string::npos);
        CHECK(clash->find("never writes over what it reads") != std::string::npos);
    }
    CHECK_FALSE(find_path_clash({{"inputs", input}}, {{"--reject", dir.path + "/other"}}));
}

TEST_CASE("two outputs naming one path not yet there clash") {
    TempDirectory dir;
    auto clash =
        find_path_clash({}, {{"--output", dir.path + "/x"}, {"--members", dir.path + "/sub/../x"}});
    // sub/ does not exist: its path cannot be resolved, and opening it fails on its own.
    CHECK_FALSE(clash);
    std::filesystem::create_directory(dir.path + "/sub");
    clash =
        find_path_clash({}, {{"--output", dir.path + "/x"}, {"--members", dir.path + "/sub/../x"}});
    REQUIRE(clash);
    CHECK(clash->find("each output needs a file of its own") != std::string::npos);
}

TEST_CASE("stdin, devices and fifos are never a clash, but a replaced output must be a file") {
    TempDirectory dir;
    CHECK_FALSE(
        find_path_clash({{"inputs", "-"}}, {{"--output", "/dev/null"}, {"--dups", "/dev/null"}}));
    auto fifo = dir.path + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    auto clash = find_path_clash({}, {{"--metrics", fifo, OutputKind::regular_only}});
    REQUIRE(clash);
    CHECK(clash->find("is not a regular file") != std::string::npos);
    CHECK_FALSE(
        find_path_clash({}, {{"--metrics", dir.path + "/m.prom", OutputKind::regular_only}}));
}

TEST_CASE("a replaced file is written under a name nobody can plant a symlink at") {
    TempDirectory dir;
    auto victim = dir.file("victim", "precious\n");
    auto target = dir.path + "/report.json";
    // The name a replaced file once had: .NAME.partial-<PID>.
    auto planted = fmt::format("{}/.report.json.partial-{}", dir.path, ::getpid());
    REQUIRE(::symlink(victim.c_str(), planted.c_str()) == 0);
    auto sink = Sink::replace_file(target);
    sink->write("{\"groups\":[]}\n");
    sink->publish();
    CHECK(content_of(victim) == "precious\n");
    CHECK(content_of(target) == "{\"groups\":[]}\n");
    // Nothing of the run is left beside it but the planted link.
    std::size_t entries = 0;
    for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.path))
        ++entries;
    CHECK(entries == 3);
}

TEST_CASE("a file replaced whole refuses a fifo instead of renaming over it") {
    TempDirectory dir;
    auto fifo = dir.path + "/fifo";
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    CHECK_THROWS_AS((void)Sink::replace_regular_file(fifo), FileSystemError);
    struct stat status {};
    REQUIRE(::stat(fifo.c_str(), &status) == 0);
    CHECK(S_ISFIFO(status.st_mode));
}

TEST_CASE("a small file is read whole within its bound, a large one and a directory refused") {
    TempDirectory dir;
    auto small = dir.file("rules.yaml", "rules: []\n");
    CHECK(read_bounded_file(small, "rules file", 1024) == "rules: []\n");
    CHECK_THROWS_WITH_AS((void)read_bounded_file("/dev/zero", "rules file", 1 << 20),
                         doctest::Contains("is larger than 1 MiB"), UsageError);
    CHECK_THROWS_WITH_AS((void)read_bounded_file(dir.path, "--secret-file", 1 << 20),
                         doctest::Contains("is a directory"), UsageError);
    CHECK_THROWS_WITH_AS((void)read_bounded_file(dir.path + "/none", "machine file", 1 << 20),
                         doctest::Contains("cannot read machine file"), UsageError);
}
