// What input arguments name (run/input_paths.hpp), on a real directory tree.

#include "idem/run/input_paths.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
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

} // namespace

TEST_CASE("a directory read recursively is its visible files, sorted by path") {
    Tree tree;
    CHECK(run::expand_inputs({tree.at("day")}, true) ==
          std::vector<std::string>{tree.at("day/a.ndjson.gz"), tree.at("day/b.ndjson"),
                                   tree.at("day/sub/c.ndjson")});
    CHECK_THROWS_AS((void)run::expand_inputs({tree.at("day")}, false), InputError);
}

TEST_CASE("a pattern is its matches in name order; a directory among them only recursively") {
    Tree tree;
    CHECK(run::expand_inputs({tree.at("day/*")}, false) ==
          std::vector<std::string>{tree.at("day/a.ndjson.gz"), tree.at("day/b.ndjson")});
    CHECK(run::expand_inputs({tree.at("day/*")}, true).size() == 3);
    CHECK_THROWS_WITH_AS((void)run::expand_inputs({tree.at("night/*.gz")}, false),
                         doctest::Contains("matches no file"), InputError);
}

TEST_CASE("files, stdin and names that exist are taken as they are, in the order given") {
    Tree tree;
    std::ofstream(tree.root / "odd[1].ndjson") << "{}\n";
    CHECK(run::expand_inputs({"-", tree.at("odd[1].ndjson"), tree.at("missing.ndjson")}, false) ==
          std::vector<std::string>{"-", tree.at("odd[1].ndjson"), tree.at("missing.ndjson")});
}
