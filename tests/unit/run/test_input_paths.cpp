// What input arguments name (run/input_paths.hpp), on a real directory tree.

#include "idem/run/input_paths.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace idem;

namespace {

struct Tree {
    std::filesystem::path root;
    Tree() {
        root = std::filesystem::temp_directory_path() /
               ("idem-input-paths-" + std::to_string(::getpid()));
        std::filesystem::remove_all(root);
        for (const auto* name : {"day/b.ndjson", "day/a.ndjson.gz", "day/sub/c.ndjson",
                                 "day/.d.partial", "day/.hidden/e.ndjson"}) {
            auto path = root / name;
            std::filesystem::create_directories(path.parent_path());
            std::ofstream(path) << "{}\n";
        }
    }
    ~Tree() { std::filesystem::remove_all(root); }
    [[nodiscard]] std::string at(const std::string& name) const { return (root / name).string(); }
};

std::vector<std::string> files_of(const std::vector<std::string>& inputs, bool recursive) {
    run::InputExpansion expansion;
    expansion.recursive = recursive;
    return run::expand_inputs(inputs, expansion).files;
}

} // namespace

TEST_CASE("a directory read recursively is its visible files, sorted by path") {
    Tree tree;
    CHECK(files_of({tree.at("day")}, true) ==
          std::vector<std::string>{tree.at("day/a.ndjson.gz"), tree.at("day/b.ndjson"),
                                   tree.at("day/sub/c.ndjson")});
    CHECK_THROWS_AS((void)files_of({tree.at("day")}, false), InputError);
}

TEST_CASE("a pattern is its matches in name order; a directory among them only recursively") {
    Tree tree;
    CHECK(files_of({tree.at("day/*")}, false) ==
          std::vector<std::string>{tree.at("day/a.ndjson.gz"), tree.at("day/b.ndjson")});
    CHECK(files_of({tree.at("day/*")}, true).size() == 3);
    CHECK_THROWS_WITH_AS((void)files_of({tree.at("night/*.gz")}, false),
                         doctest::Contains("matches no file"), InputError);
}

TEST_CASE("files, stdin and names that exist are taken as they are, in the order given") {
    Tree tree;
    std::ofstream(tree.root / "odd[1].ndjson") << "{}\n";
    CHECK(files_of({"-", tree.at("odd[1].ndjson"), tree.at("missing.ndjson")}, false) ==
          std::vector<std::string>{"-", tree.at("odd[1].ndjson"), tree.at("missing.ndjson")});
}

TEST_CASE("a link out of a directory is left out and said, unless links may be followed") {
    Tree tree;
    std::ofstream(tree.root / "outside.ndjson") << "{}\n";
    std::filesystem::create_symlink(tree.root / "outside.ndjson", tree.root / "day/z.ndjson");
    std::filesystem::create_symlink("/proc/self/environ", tree.root / "day/env.ndjson");
    std::filesystem::create_symlink(tree.root / "day/b.ndjson", tree.root / "day/sub/b2.ndjson");
    run::InputExpansion expansion;
    expansion.recursive = true;
    auto expanded = run::expand_inputs({tree.at("day")}, expansion);
    CHECK(expanded.files ==
          std::vector<std::string>{tree.at("day/a.ndjson.gz"), tree.at("day/b.ndjson"),
                                   tree.at("day/sub/b2.ndjson"), tree.at("day/sub/c.ndjson")});
    REQUIRE(expanded.skipped.size() == 2);
    CHECK(expanded.skipped[0].path == tree.at("day/env.ndjson"));
    CHECK(expanded.skipped[0].reason.find("/proc") != std::string::npos);
    CHECK(expanded.skipped[1].path == tree.at("day/z.ndjson"));
    CHECK(expanded.skipped[1].reason.find("--follow-links") != std::string::npos);

    expansion.links = run::LinkPolicy::follow_links;
    expanded = run::expand_inputs({tree.at("day")}, expansion);
    CHECK(expanded.files.size() == 5);   // z.ndjson too
    CHECK(expanded.skipped.size() == 1); // never /proc
}

TEST_CASE("a pattern takes regular files only, inside its fixed prefix") {
    Tree tree;
    REQUIRE(::mkfifo((tree.root / "day/live.ndjson").c_str(), 0600) == 0);
    std::filesystem::create_symlink("/dev/zero", tree.root / "day/zero.ndjson");
    std::ofstream(tree.root / "elsewhere.ndjson") << "{}\n";
    std::filesystem::create_symlink(tree.root / "elsewhere.ndjson", tree.root / "day/x.ndjson");
    run::InputExpansion expansion;
    auto expanded = run::expand_inputs({tree.at("day/*.ndjson")}, expansion);
    CHECK(expanded.files == std::vector<std::string>{tree.at("day/b.ndjson")});
    CHECK(expanded.skipped.size() == 3);
}

TEST_CASE("the files a run writes are never what a directory or pattern expands to") {
    Tree tree;
    std::ofstream(tree.root / "day/idem.db") << "SQLite format 3";
    run::InputExpansion expansion;
    expansion.recursive = true;
    expansion.written = {tree.at("day/idem.db"), tree.at("day/idem.db-wal"),
                         tree.at("day/./b.ndjson")};
    auto expanded = run::expand_inputs({tree.at("day")}, expansion);
    CHECK(expanded.files ==
          std::vector<std::string>{tree.at("day/a.ndjson.gz"), tree.at("day/sub/c.ndjson")});
    CHECK(expanded.skipped.size() == 2);
    // Named one by one, a file is taken as it is: the clash check refuses it.
    CHECK(run::expand_inputs({tree.at("day/idem.db")}, expansion).files.size() == 1);
}
