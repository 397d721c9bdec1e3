#include "idem/io/byte_source.hpp"
#include "idem/io/sink.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/unique_fd.hpp"

#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

using namespace idem;
using namespace idem::io;

namespace {

struct TempPath {
    std::string path;
    TempPath() {
        char name[] = "/tmp/idem-sink-XXXXXX";
        int fd = ::mkstemp(name);
        REQUIRE(fd >= 0);
        ::close(fd);
        path = name;
    }
    ~TempPath() { ::unlink(path.c_str()); }
    [[nodiscard]] std::string content() const {
        std::ifstream in(path, std::ios::binary);
        std::stringstream all;
        all << in.rdbuf();
        return all.str();
    }
};

std::string_view piece_text(const iovec& piece) {
    return {static_cast<const char*>(piece.iov_base), piece.iov_len};
}

} // namespace

TEST_CASE("records written in place and copied bytes come out in the order written") {
    TempPath file;
    // A block as the reader hands it over: lines with their newlines.
    std::string block = "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\r\n{\"d\":4}\n";
    auto sink = Sink::create_file(file.path);
    sink->write_record_in_place(std::string_view(block).substr(0, 8));
    sink->write_record_in_place(std::string_view(block).substr(8, 8)); // extends the first piece
    sink->write_record("{\"c\":3}");                                   // copied (it ended in CRLF)
    sink->write("# a copied line\n");
    sink->write_record_in_place(std::string_view(block).substr(25, 8));
    CHECK(sink->size() == 8 + 8 + 8 + 16 + 8);
    CHECK(sink->records_written() == 4);
    sink->release_in_place();
    // Released: the caller's memory may change without changing the file.
    block.assign(block.size(), 'x');
    sink->flush();
    CHECK(file.content() == "{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n# a copied line\n{\"d\":4}\n");
    CHECK(sink->size() == file.content().size());
}

TEST_CASE("more pieces than one gather write takes go out in order") {
    TempPath file;
    std::string block;
    for (int i = 0; i < 5000; ++i)
        block += "{\"n\":" + std::to_string(i) + "}\n";
    std::string expected;
    {
        auto sink = Sink::create_file(file.path);
        std::size_t at = 0;
        for (int i = 0; i < 5000; ++i) {
            auto end = block.find('\n', at) + 1;
            auto line = std::string_view(block).substr(at, end - at);
            // Every other record copied, so no two in-place pieces touch.
            if (i % 2 == 0)
                sink->write_record_in_place(line);
            else
                sink->write_record(line.substr(0, line.size() - 1));
            expected += line;
            at = end;
        }
        sink->flush();
    }
    CHECK(file.content() == expected);
}

TEST_CASE("a short gather write resumes inside the piece it stopped in") {
    std::string a = "aaaa", b = "bbbbbb", c = "cc";
    std::vector<iovec> pieces{{a.data(), a.size()}, {b.data(), b.size()}, {c.data(), c.size()}};
    SUBCASE("stopped inside the second piece") {
        auto next = skip_written(pieces, 0, 6);
        CHECK(next == 1);
        CHECK(piece_text(pieces[1]) == "bbbb");
        CHECK(piece_text(pieces[2]) == "cc");
    }
    SUBCASE("stopped exactly at a piece's end") {
        auto next = skip_written(pieces, 0, 4);
        CHECK(next == 1);
        CHECK(piece_text(pieces[1]) == "bbbbbb");
    }
    SUBCASE("everything written") {
        CHECK(skip_written(pieces, 0, 12) == 3);
    }
    SUBCASE("from a later piece") {
        auto next = skip_written(pieces, 1, 7);
        CHECK(next == 2);
        CHECK(piece_text(pieces[2]) == "c");
    }
}

TEST_CASE("a pipe written to holds a buffer's worth, a file is left as it is") {
    // A 64 KiB pipe made each megabyte written wait on its reader some
    // fifteen times; the sink widens the pipe it writes to (best effort).
    int ends[2];
    REQUIRE(::pipe2(ends, O_CLOEXEC) == 0);
    UniqueFd read_end(ends[0]), write_end(ends[1]);
    auto before = ::fcntl(read_end.get(), F_GETPIPE_SZ);
    REQUIRE(before < 1 << 20); // Linux's default is 64 KiB
    {
        auto sink = Sink::create_file(fmt::format("/proc/self/fd/{}", write_end.get()));
        sink->write("{\"a\":1}\n");
        sink->flush();
    }
    // Unprivileged, a pipe grows only up to the system's limit.
    long most = 0;
    std::ifstream("/proc/sys/fs/pipe-max-size") >> most;
    auto after = ::fcntl(read_end.get(), F_GETPIPE_SZ);
    if (::geteuid() == 0 || most >= 1 << 20)
        CHECK(after == 1 << 20);
    else
        CHECK(after == before);
    char line[16] = {};
    CHECK(::read(read_end.get(), line, sizeof line) == 8);
    // A regular file takes no such call and is written as before.
    TempPath file;
    auto sink = Sink::create_file(file.path);
    sink->write("x\n");
    sink->flush();
    CHECK(file.content() == "x\n");
}

TEST_CASE("a write that fails leaves nothing pending to be written twice") {
    auto sink = Sink::create_file("/dev/full");
    std::string line = "{\"a\":1}\n";
    sink->write_record_in_place(line);
    CHECK_THROWS_AS(sink->release_in_place(), FileSystemError);
    CHECK(sink->size() == 0);
    CHECK_NOTHROW(sink->flush());
}

TEST_CASE("a replaced file appears whole when published, and is left as it was otherwise") {
    TempPath report;
    { std::ofstream(report.path) << "the previous report\n"; }
    // The one file beside the report whose name starts with its own.
    auto partial_of = [&]() -> std::string {
        auto slash = report.path.rfind('/');
        auto directory = report.path.substr(0, slash);
        auto prefix = "." + report.path.substr(slash + 1) + ".";
        for (const auto& entry : std::filesystem::directory_iterator(directory))
            if (entry.path().filename().string().starts_with(prefix)) return entry.path().string();
        return report.path + ".none";
    };
    {
        auto sink = Sink::replace_file(report.path);
        sink->write_record("{\"half\":true}");
        sink->flush();
        CHECK(report.content() == "the previous report\n"); // not yet
        CHECK(::access(partial_of().c_str(), F_OK) == 0);
        // Dropped unpublished (an error on the way): the old file stands.
    }
    CHECK(report.content() == "the previous report\n");
    CHECK(::access(partial_of().c_str(), F_OK) != 0);
    auto sink = Sink::replace_file(report.path);
    sink->write_record("{\"whole\":true}");
    sink->publish();
    CHECK(report.content() == "{\"whole\":true}\n");
    CHECK(::access(partial_of().c_str(), F_OK) != 0);
}

TEST_CASE("a device cannot be replaced: it is written as it is") {
    auto sink = Sink::replace_file("/dev/null");
    sink->write_record("{}");
    CHECK_NOTHROW(sink->publish());
}

namespace {
// A file's bytes as idem reads them: decompressed, whatever it holds.
std::string read_back(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    REQUIRE(fd.valid());
    auto source = open_byte_source(fd.get(), path);
    std::string all, chunk(1 << 16, '\0');
    while (auto got = source->read(chunk.data(), chunk.size()))
        all.append(chunk.data(), got);
    return all;
}
} // namespace

TEST_CASE("a .gz or .zst sink writes one whole member per flush: cut back to one, it reads whole") {
    for (const char* suffix : {".gz", ".zst"}) {
        CAPTURE(suffix);
        TempPath scratch;
        auto path = scratch.path + suffix;
        std::uint64_t committed = 0;
        {
            auto sink = Sink::create_file(path);
            sink->write_record(R"({"id":1})");
            std::string line = "{\"id\":2}\n"; // in place: copied into the member
            sink->write_record_in_place(line);
            sink->flush();
            committed = sink->size();
            sink->write_record(R"({"id":"lost"})");
            sink->flush();
        }
        CHECK(read_back(path) == "{\"id\":1}\n{\"id\":2}\n{\"id\":\"lost\"}\n");
        {
            auto sink = Sink::resume_file(path, committed);
            sink->write_record(R"({"id":3})");
            sink->flush();
        }
        CHECK(read_back(path) == "{\"id\":1}\n{\"id\":2}\n{\"id\":3}\n");
        CHECK(std::filesystem::file_size(path) < 200);
        ::unlink(path.c_str());
    }
}
