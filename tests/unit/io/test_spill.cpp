#include "idem/io/spill.hpp"

#include "idem/io/block_reader.hpp"

#include <cstdint>
#include <doctest/doctest.h>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

using namespace idem::io;

TEST_CASE("a spill directory is new, and goes with every file in it") {
    auto parent = std::filesystem::temp_directory_path();
    std::filesystem::path kept;
    {
        SpillDirectory first(parent, "unit");
        SpillDirectory second(parent, "unit");
        CHECK(first.path() != second.path());
        CHECK(first.path().parent_path() == parent);
        CHECK(first.path().filename().string().starts_with("idem-unit-"));
        SpillFile file(first.path() / "rows");
        file.write("some bytes");
        kept = first.path();
        CHECK(std::filesystem::exists(kept / "rows"));
    }
    CHECK_FALSE(std::filesystem::exists(kept));
}

TEST_CASE("partitions hand back what was appended to each, in order, buffered or not") {
    SpillDirectory directory(std::filesystem::temp_directory_path(), "unit");
    SpillPartitions partitions(directory, "part", 4);
    std::vector<std::string> expected(4);
    for (int i = 0; i < 20000; ++i) { // past the write buffer several times
        auto row = "row " + std::to_string(i) + ";";
        auto partition = static_cast<std::size_t>(i % 3);
        partitions.append(partition, row);
        expected[partition] += row;
    }
    CHECK(partitions.bytes_written() ==
          expected[0].size() + expected[1].size() + expected[2].size());
    for (std::size_t p = 0; p < 4; ++p) {
        CHECK(partitions.flushed(p).map_all().bytes() == expected[p]);
    }
}

TEST_CASE("a file read in pieces: full pieces, the last shorter, and writing goes on at the end") {
    SpillDirectory directory(std::filesystem::temp_directory_path(), "unit");
    SpillFile file(directory.path() / "pieces");
    file.write(std::string(10, 'a'));
    std::vector<std::size_t> sizes;
    std::string seen;
    file.read_pieces(
        [&](std::string_view piece) {
            sizes.push_back(piece.size());
            seen += piece;
        },
        4);
    CHECK(sizes == std::vector<std::size_t>{4, 4, 2});
    CHECK(seen == std::string(10, 'a'));
    file.write("bc");
    CHECK(file.map_all().bytes() == std::string(10, 'a') + "bc");
    file.truncate();
    CHECK(file.bytes_written() == 0);
    file.write("z");
    CHECK(file.map_all().bytes() == "z");
}

TEST_CASE("a file mapped whole holds what was written, the write buffer's tail included") {
    SpillDirectory directory(std::filesystem::temp_directory_path(), "unit");
    SpillPartitions partitions(directory, "mapped", 2);
    CHECK(partitions.flushed(1).map_all().bytes().empty()); // nothing written: nothing mapped
    std::string expected;
    for (int i = 0; i < 20000; ++i) { // past the write buffer, then a part still in it
        auto row = "row " + std::to_string(i) + ";";
        partitions.append(0, row);
        expected += row;
    }
    auto mapped = partitions.flushed(0).map_all();
    CHECK(mapped.bytes() == expected);
    // Moved, the mapping goes with it; the one moved from holds nothing.
    MappedBytes kept = std::move(mapped);
    CHECK(kept.bytes() == expected);
    CHECK(mapped.bytes().empty()); // NOLINT(bugprone-use-after-move): what a move leaves
    // Replaced by a later mapping of the grown file: the new bytes only.
    partitions.append(0, "tail");
    kept = partitions.flushed(0).map_all();
    CHECK(kept.bytes() == expected + "tail");
}

TEST_CASE("a file read whole into a reused buffer: the write buffer's tail, a grown file, none") {
    SpillDirectory directory(std::filesystem::temp_directory_path(), "unit");
    SpillPartitions partitions(directory, "read", 2);
    ByteBuffer buffer;
    CHECK(partitions.flushed(1).read_all(buffer).empty()); // nothing written: nothing read
    std::string expected;
    for (int i = 0; i < 200000; ++i) { // past the write buffer and a huge page, then a tail
        auto row = "row " + std::to_string(i) + ";";
        partitions.append(0, row);
        expected += row;
    }
    CHECK(partitions.flushed(0).read_all(buffer) == expected);
    // The same buffer again, for the grown file: all of it, the new bytes too.
    partitions.append(0, "tail");
    CHECK(partitions.flushed(0).read_all(buffer) == expected + "tail");
    // And for a smaller one: its bytes only, though the buffer holds more.
    partitions.append(1, "short");
    CHECK(partitions.flushed(1).read_all(buffer) == "short");
}

TEST_CASE("packed fields lie back to back, without padding, in the order put") {
    PackedFields<16> fields;
    fields.put(std::uint32_t{7}).put(std::uint8_t{1}).put(std::uint64_t{9});
    auto bytes = fields.bytes();
    REQUIRE(bytes.size() == 13);
    std::uint32_t first = 0;
    std::uint8_t second = 0;
    std::uint64_t third = 0;
    CHECK(take_fixed(bytes, first));
    CHECK(take_fixed(bytes, second));
    CHECK(take_fixed(bytes, third));
    CHECK((first == 7 && second == 1 && third == 9));
    CHECK(bytes.empty());
    // Past its room, a put throws instead of writing beyond it.
    CHECK_THROWS_AS(fields.put(std::uint32_t{0}), std::length_error);
}
