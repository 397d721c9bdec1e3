#include "idem/io/line_reader.hpp"
#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <string>
#include <unistd.h>
#include <vector>

using namespace idem::io;

namespace {

// A pipe that a writer thread-free test can fill up front (small inputs only).
struct Pipe {
    int fds[2];
    explicit Pipe(const std::string& content) {
        REQUIRE(::pipe(fds) == 0);
        REQUIRE(::write(fds[1], content.data(), content.size()) == static_cast<ssize_t>(content.size()));
        ::close(fds[1]);
    }
    ~Pipe() { ::close(fds[0]); }
};

struct Collector final : OversizeHandler {
    std::string bytes;
    std::vector<std::uint64_t> lines;
    void begin(std::string_view, std::uint64_t line, std::uint64_t) override { lines.push_back(line); }
    void chunk(std::string_view data) override { bytes.append(data); }
    void end(std::uint64_t) override { bytes += '|'; }
};

} // namespace

TEST_CASE("yields lines with numbers and byte offsets, skipping blank lines and CR") {
    Pipe pipe("{\"a\":1}\r\n\n  \n{\"b\":2}\n{\"c\":3}");
    LineReader reader(pipe.fds[0], "in.ndjson", 1024, nullptr);
    auto first = reader.next();
    REQUIRE(first);
    CHECK(first->bytes == "{\"a\":1}");
    CHECK(first->number == 1);
    CHECK(first->byte_offset == 0);
    auto second = reader.next();
    REQUIRE(second);
    CHECK(second->bytes == "{\"b\":2}");
    CHECK(second->number == 4);
    CHECK(second->byte_offset == 13);
    auto third = reader.next();
    REQUIRE(third);
    CHECK(third->bytes == "{\"c\":3}"); // no trailing newline
    CHECK(third->byte_offset == 21);
    CHECK_FALSE(reader.next());
}

TEST_CASE("rejects a line longer than the limit without buffering it, and carries on") {
    std::string big(5000, 'x');
    Pipe pipe("{\"a\":1}\n" + big + "\n{\"b\":2}\n");
    Collector collector;
    LineReader reader(pipe.fds[0], "in", 100, &collector);
    CHECK(reader.next()->bytes == "{\"a\":1}");
    auto oversized = reader.next();
    REQUIRE(oversized);
    CHECK(oversized->oversized_bytes == 5000);
    CHECK(oversized->number == 2);
    CHECK(oversized->byte_offset == 8);
    CHECK(collector.bytes == big + "|");
    auto after = reader.next();
    REQUIRE(after);
    CHECK(after->bytes == "{\"b\":2}");
    CHECK(after->number == 3);
    CHECK(after->byte_offset == 5009);
}

TEST_CASE("a record larger than the read buffer streams to the handler piece by piece") {
    std::string big(3 << 20, 'y'); // 3 MiB, beyond the 1 MiB initial buffer
    Pipe* pipe = nullptr;
    char path[] = "/tmp/idem-line-reader-XXXXXX";
    int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    std::string content = big + "\n{\"ok\":true}\n";
    REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    ::lseek(fd, 0, SEEK_SET);
    Collector collector;
    LineReader reader(fd, path, 1 << 20, &collector);
    auto oversized = reader.next();
    REQUIRE(oversized);
    CHECK(oversized->oversized_bytes == big.size());
    CHECK(collector.bytes.size() == big.size() + 1);
    CHECK(reader.next()->bytes == "{\"ok\":true}");
    ::close(fd);
    ::unlink(path);
    (void)pipe;
}

TEST_CASE("a record just under the limit passes whole, even across buffer refills") {
    std::string record = "{\"k\":\"" + std::string((2 << 20) - 10, 'z') + "\"}";
    char path[] = "/tmp/idem-line-reader-XXXXXX";
    int fd = ::mkstemp(path);
    REQUIRE(fd >= 0);
    std::string content = "{}\n" + record + "\n";
    REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
    ::lseek(fd, 0, SEEK_SET);
    LineReader reader(fd, path, 4 << 20, nullptr);
    CHECK(reader.next()->bytes == "{}");
    auto line = reader.next();
    REQUIRE(line);
    CHECK(line->bytes.size() == record.size());
    CHECK(line->bytes == record);
    ::close(fd);
    ::unlink(path);
}
