#include "idem/io/block_reader.hpp"
#include "idem/run/input.hpp"

#include <doctest/doctest.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace idem;
using namespace idem::io;

namespace {

// A temporary file holding `content`, open for reading.
struct TempInput {
    std::string path;
    int fd = -1;
    explicit TempInput(const std::string& content) {
        char name[] = "/tmp/idem-block-reader-XXXXXX";
        fd = ::mkstemp(name);
        REQUIRE(fd >= 0);
        path = name;
        REQUIRE(::write(fd, content.data(), content.size()) ==
                static_cast<ssize_t>(content.size()));
        ::lseek(fd, 0, SEEK_SET);
    }
    ~TempInput() {
        ::close(fd);
        ::unlink(path.c_str());
    }
};

struct Collector final : OversizeHandler {
    std::string bytes;
    void begin(std::string_view) override {}
    void chunk(std::string_view data) override { bytes.append(data); }
    void end() override { bytes += '|'; }
};

std::vector<std::string> all_lines(BlockReader& reader, std::size_t target) {
    std::vector<std::string> lines;
    Block block;
    while (reader.next(block, target)) {
        LineCursor cursor(block.lines());
        while (auto line = cursor.next())
            lines.emplace_back(line->bytes);
        if (block.oversized_line_bytes)
            lines.push_back("<oversized " + std::to_string(block.oversized_line_bytes) + ">");
    }
    return lines;
}

} // namespace

TEST_CASE("blocks hold whole lines, whatever the block size") {
    std::string content;
    for (int i = 0; i < 100; ++i)
        content += "{\"n\":" + std::to_string(i) + "}\n";
    for (std::size_t target : {1UL, 7UL, 64UL, 4096UL}) {
        CAPTURE(target);
        TempInput input(content);
        BlockReader reader(input.fd, input.path, 1024, nullptr);
        auto lines = all_lines(reader, target);
        REQUIRE(lines.size() == 100);
        CHECK(lines[0] == "{\"n\":0}");
        CHECK(lines[99] == "{\"n\":99}");
    }
}

TEST_CASE("the cursor skips blank lines but counts them, and keeps a CRLF line's CR") {
    LineCursor cursor("{\"a\":1}\r\n\r\n  \n{\"b\":2}\n{\"c\":3}");
    auto first = cursor.next();
    CHECK(first->bytes == "{\"a\":1}\r"); // written back with its "\n", the line is whole
    CHECK(first->index == 0);
    CHECK(first->newline_follows);
    auto second = cursor.next();
    CHECK(second->bytes == "{\"b\":2}");
    CHECK(second->index == 3);
    CHECK(second->byte_offset == 14);
    CHECK(second->newline_follows);
    auto third = cursor.next();
    CHECK(third->bytes == "{\"c\":3}"); // the last line needs no newline
    CHECK_FALSE(third->newline_follows);
    CHECK_FALSE(cursor.next());
    CHECK(cursor.lines_seen() == 5);
}

TEST_CASE(
    "a line longer than the limit is streamed to the handler, never held, and reading carries on") {
    std::string big(3 << 20, 'y'); // beyond what a block holds
    TempInput input("{\"a\":1}\n" + big + "\n{\"b\":2}\n");
    Collector collector;
    BlockReader reader(input.fd, input.path, 1 << 20, &collector);
    auto lines = all_lines(reader, 1 << 16);
    CHECK(lines == std::vector<std::string>{"{\"a\":1}", "<oversized 3145728>", "{\"b\":2}"});
    CHECK(collector.bytes == big + "|");
}

TEST_CASE("records know their line and byte offset across blocks and oversized lines") {
    std::string big(2 << 20, 'z');
    TempInput input("{\"a\":1}\n\n" + big + "\n{\"b\":2}\r\n{\"c\":3}");
    run::InputOptions options;
    options.paths = {input.path};
    options.max_record_bytes = 1 << 20;
    Collector collector;
    run::InputStream stream(options, &collector);
    auto a = stream.next();
    CHECK(a->line == 1);
    CHECK(a->byte_offset == 0);
    auto oversized = stream.next();
    CHECK(oversized->oversized_bytes == big.size());
    CHECK(oversized->line == 3);
    CHECK(oversized->byte_offset == 9);
    auto b = stream.next();
    CHECK(b->bytes == "{\"b\":2}\r"); // a CRLF line keeps its CR
    CHECK(b->line == 4);
    CHECK(b->byte_offset == 9 + big.size() + 1);
    auto c = stream.next();
    CHECK(c->line == 5);
    CHECK_FALSE(stream.next());
}

TEST_CASE("a whole line over the limit but within a block is flagged with its bytes") {
    TempInput input("{\"a\":1}\n{\"long\":\"" + std::string(200, 'x') + "\"}\n{\"b\":2}\n");
    run::InputOptions options;
    options.paths = {input.path};
    options.max_record_bytes = 100;
    run::InputStream stream(options, nullptr);
    CHECK(stream.next()->oversized_bytes == 0);
    auto long_line = stream.next();
    CHECK(long_line->oversized_bytes == 211);
    CHECK(long_line->bytes.size() == 211);
    CHECK(stream.next()->line == 3);
}

TEST_CASE("lines after an oversized line, read in the same chunk, are kept whole") {
    // Both long lines are longer than a read, so both are streamed; the two
    // short lines between them arrive in the read that ends the first, and
    // must go on as lines, not be swept into the second.
    std::string big(200 * 1024, 'q');
    std::string rs(200 * 1024, 'r');
    TempInput input(big + "\n{\"a\":1}\n{\"b\":2}\n" + rs + "\n{\"c\":3}\n");
    Collector collector;
    BlockReader reader(input.fd, input.path, 1024, &collector);
    auto lines = all_lines(reader, 64);
    CHECK(lines == std::vector<std::string>{"<oversized 204800>", "{\"a\":1}", "{\"b\":2}",
                                            "<oversized 204800>", "{\"c\":3}"});
    CHECK(collector.bytes == big + "|" + rs + "|");
}
