// The owned-output protocol (store/owned_outputs.hpp), on a real SQLite
// file and real output files: what a killed run committed is what a rerun
// resumes from, and a finished run is recognized by its input.

#include "idem/store/checkpoints.hpp"
#include "idem/store/owned_outputs.hpp"
#include "idem/store/store.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

using namespace idem;
using namespace idem::store;

namespace {

struct Scratch {
    std::filesystem::path dir;
    Scratch() {
        dir = std::filesystem::temp_directory_path() /
              ("idem-owned-test-" + std::to_string(::getpid()));
        std::filesystem::remove_all(dir);
        std::filesystem::create_directories(dir);
    }
    ~Scratch() { std::filesystem::remove_all(dir); }
    [[nodiscard]] std::string path(const std::string& name) const { return (dir / name).string(); }
};

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

} // namespace

TEST_CASE("a finished run's checkpoint counts only for the same input") {
    Scratch scratch;
    auto path = scratch.path("store.db");
    auto log = scratch.path("in.ndjson");
    { std::ofstream(log) << "{\"id\":1}\n"; }
    auto input = input_identity({log});
    REQUIRE(input);
    CHECK(input_identity({log, "-"}) == std::nullopt); // stdin cannot be recognized
    io::SilentDiagnostics quiet;
    {
        auto store = open_store(parse_store_uri(path));
        Checkpoint done;
        done.records_done = 7;
        done.file_bytes["output"] = 120;
        done.file_bytes["dups"] = 30;
        save_finished(store->checkpoints(), checkpoint_name("dedup", "default", "out.ndjson"), done,
                      input);
        store->commit();
    }
    auto store = open_store(parse_store_uri(path));
    auto& checkpoints = store->checkpoints();
    auto again = find_resumption(checkpoints, "dedup", "default", "out.ndjson", input, quiet);
    REQUIRE(again.checkpoint);
    CHECK(again.checkpoint->records_done == 7);
    CHECK(again.checkpoint->file_bytes.at("output") == 120);
    CHECK(again.checkpoint->file_bytes.at("dups") == 30);
    CHECK(again.checkpoint->finished_input == input);
    { std::ofstream(log, std::ios::app) << "{\"id\":2}\n"; } // the log grew
    auto grown = input_identity({log});
    CHECK(grown != input);
    CHECK_FALSE(
        find_resumption(checkpoints, "dedup", "default", "out.ndjson", grown, quiet).checkpoint);
    CHECK_FALSE(find_resumption(checkpoints, "dedup", "default", "out.ndjson", std::nullopt, quiet)
                    .checkpoint);
}

TEST_CASE("without -o nothing is owned: side outputs are made anew and nothing is saved") {
    Scratch scratch;
    auto store = open_store(parse_store_uri(scratch.path("store.db")));
    io::SilentDiagnostics quiet;
    auto standard = io::Sink::create_file(scratch.path("stdout"));
    std::vector<std::string> inputs{"-"};
    { std::ofstream(scratch.path("dups.ndjson")) << "old\n"; }
    OwnedOutputs outputs(store->checkpoints(), {"dedup", "default", inputs}, "", *standard, quiet);
    CHECK_FALSE(outputs.owned());
    CHECK(&outputs.output() == standard.get());
    CHECK(outputs.add("gaps", "") == nullptr);
    auto* dups = outputs.add("dups", scratch.path("dups.ndjson"));
    REQUIRE(dups != nullptr);
    dups->write_record("{\"n\":1}");
    outputs.checkpoint(store->checkpoints(), 5);
    outputs.flush();
    CHECK(read_file(scratch.path("dups.ndjson")) == "{\"n\":1}\n");
    CHECK(outputs.checkpoint_name().empty());
    CHECK(outputs.resume_point() == 0);
}

TEST_CASE("a rerun cuts every owned output back to what the killed run committed") {
    Scratch scratch;
    auto store_path = scratch.path("store.db");
    auto out = scratch.path("out.ndjson");
    auto late = scratch.path("late.ndjson");
    std::vector<std::string> inputs{"-"};
    io::SilentDiagnostics quiet;
    auto standard = io::Sink::create_file(scratch.path("stdout"));
    {
        auto store = open_store(parse_store_uri(store_path));
        OwnedOutputs outputs(store->checkpoints(), {"reorder", "s", inputs}, out, *standard, quiet);
        CHECK(outputs.owned());
        CHECK_FALSE(outputs.resumed());
        auto* side = outputs.add("late", late);
        outputs.output().write_record("{\"a\":1}");
        side->write_record("{\"late\":1}");
        outputs.flush();
        outputs.checkpoint(store->checkpoints(), 3);
        store->commit();
        // Written after the last commit, then killed: a rerun must not keep it.
        outputs.output().write_record("{\"a\":2}");
        side->write_record("{\"late\":2}");
        outputs.flush();
    }
    CHECK(read_file(out) == "{\"a\":1}\n{\"a\":2}\n");
    auto store = open_store(parse_store_uri(store_path));
    OwnedOutputs again(store->checkpoints(), {"reorder", "s", inputs}, out, *standard, quiet);
    CHECK(again.resumed());
    CHECK(again.resume_point() == 3);
    auto* side = again.add("late", late);
    CHECK(read_file(out) == "{\"a\":1}\n");
    CHECK(read_file(late) == "{\"late\":1}\n");
    again.output().write_record("{\"a\":2}");
    side->write_record("{\"late\":2}");
    // A checkpoint is never behind the run it resumes.
    again.checkpoint(store->checkpoints(), 1);
    store->commit();
    auto saved = store->checkpoints().load_checkpoint(again.checkpoint_name());
    REQUIRE(saved);
    CHECK(saved->records_done == 3);
    CHECK(saved->file_bytes.at("output") == 16);
    CHECK(saved->file_bytes.at("late") == 22);
    // Another command or scope writing the same file keeps its own checkpoint.
    OwnedOutputs other(store->checkpoints(), {"dedup", "s", inputs}, scratch.path("o2"), *standard,
                       quiet);
    CHECK_FALSE(other.resumed());
}

TEST_CASE("a store without checkpoints says so") {
    // Every backend here keeps checkpoints; the role accessor is what a
    // backend without one would answer through.
    auto store = open_store(parse_store_uri(":memory:"));
    CHECK_NOTHROW((void)store->checkpoints());
    CHECK_THROWS_WITH_AS((void)store->evidence(),
                         doctest::Contains("store :memory: does not keep evidence"), StoreError);
}

TEST_CASE("what a killed run counted is carried into the run that resumes it, and saved on") {
    Scratch scratch;
    auto store_path = scratch.path("store.db");
    auto out = scratch.path("out.ndjson");
    std::vector<std::string> inputs{"-"};
    io::SilentDiagnostics quiet;
    auto standard = io::Sink::create_file(scratch.path("stdout"));
    {
        auto store = open_store(parse_store_uri(store_path));
        OwnedOutputs outputs(store->checkpoints(), {"states", "s", inputs}, out, *standard, quiet);
        outputs.checkpoint(store->checkpoints(), 10, {{"illegal", 1}, {"rejected", 2}});
        store->commit();
    }
    auto store = open_store(parse_store_uri(store_path));
    OwnedOutputs again(store->checkpoints(), {"states", "s", inputs}, out, *standard, quiet);
    REQUIRE(again.resumed());
    RunCounts summary{{"in", 20}, {"illegal", 0}, {"rejected", 1}, {"ok", 4}};
    again.add_carried(summary);
    CHECK(summary == RunCounts{{"in", 20}, {"illegal", 1}, {"rejected", 3}, {"ok", 4}});
    again.checkpoint(store->checkpoints(), 20, {{"illegal", 0}, {"rejected", 1}, {"ok", 4}});
    store->commit();
    auto saved = store->checkpoints().load_checkpoint(again.checkpoint_name());
    REQUIRE(saved);
    CHECK(saved->counts ==
          std::map<std::string, std::uint64_t>{{"illegal", 1}, {"ok", 4}, {"rejected", 3}});
    CHECK(only_named(summary, {"ok", "illegal"}) == RunCounts{{"illegal", 1}, {"ok", 4}});
}

TEST_CASE("a second run on the same -o waits for the first and gives up at its lock timeout, "
          "leaving no descriptor open") {
    Scratch scratch;
    auto out = scratch.path("out.ndjson");
    std::vector<std::string> inputs{"-"};
    io::SilentDiagnostics quiet;
    auto standard = io::Sink::create_file(scratch.path("stdout"));
    auto first_store = open_store(parse_store_uri(scratch.path("a.db")));
    auto second_store = open_store(parse_store_uri(scratch.path("b.db")));
    {
        OwnedOutputs first(first_store->checkpoints(), {"states", "s", inputs}, out, *standard,
                           quiet);
        auto open_descriptors = [] {
            return std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                 std::filesystem::directory_iterator());
        };
        auto before = open_descriptors();
        for (int attempt = 0; attempt < 3; ++attempt)
            CHECK_THROWS_WITH_AS(
                OwnedOutputs(second_store->checkpoints(),
                             {"states", "s", inputs, std::chrono::milliseconds(50)}, out, *standard,
                             quiet),
                doctest::Contains("the output of another idem run"), FileSystemError);
        CHECK(open_descriptors() == before); // each gave its descriptor back
    }
    // The first is gone: the file is free.
    OwnedOutputs second(second_store->checkpoints(),
                        {"states", "s", inputs, std::chrono::milliseconds(50)}, out, *standard,
                        quiet);
    CHECK(second.owned());
}
