// The progress line of a long run (io/progress.hpp).

#include "idem/io/progress.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace std::chrono_literals;

TEST_CASE("with the inputs' size known: the share read and what is left at this pace") {
    auto line = io::progress_line(400'000, 25ULL << 20, 100ULL << 20, 10s);
    CHECK(line.find("400000 records") != std::string::npos);
    CHECK(line.find("25 MiB of 100 MiB (25%)") != std::string::npos);
    CHECK(line.find("40000 records/s") != std::string::npos);
    CHECK(line.find("ETA 30s") != std::string::npos);
}

TEST_CASE("a pipe or a device has no size: records, bytes and the rate only") {
    auto line = io::progress_line(1000, 2048, std::nullopt, 2s);
    CHECK(line == "idem: 1000 records, 2.0 KiB read, 500 records/s");
}

TEST_CASE("read past the size it had when the run began (a growing file): 100%, no negative ETA") {
    auto line = io::progress_line(10, 300, 200, 1s);
    CHECK(line.find("(100%)") != std::string::npos);
    CHECK(line.find("ETA 0s") != std::string::npos);
}

TEST_CASE("the first report draws the line, however soon it comes; then at most one per interval") {
    io::ProgressPacer pacer(250ms);
    io::ProgressPacer::Clock::time_point start{};
    CHECK(pacer.due(start + 10ms));
    CHECK_FALSE(pacer.due(start + 100ms));
    CHECK_FALSE(pacer.due(start + 259ms));
    CHECK(pacer.due(start + 260ms));
    CHECK_FALSE(pacer.due(start + 300ms));
    CHECK(pacer.due(start + 2s));
}
