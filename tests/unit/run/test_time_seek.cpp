// Cutting a file in event-time order to --since/--until (run/time_seek.hpp).

#include "idem/run/time_seek.hpp"

#include "idem/util/errors.hpp"

#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace idem::run {

namespace {

ReadAt reading(const std::string& file) {
    return [&file](std::uint64_t offset, char* to, std::size_t size) -> std::size_t {
        if (offset >= file.size()) return 0;
        auto got = std::min<std::size_t>(size, file.size() - offset);
        std::memcpy(to, file.data() + offset, got);
        return got;
    };
}

Timestamp at_second(long long second) {
    return Timestamp(std::chrono::duration_cast<Timestamp::duration>(std::chrono::seconds(second)));
}

TimeOrder by_ts() {
    TimeOrder order;
    order.time_field = record::FieldPath::parse("ts");
    return order;
}

// `count` records one second apart from `first`, padded to `width` bytes.
std::string log_of(int count, long long first = 1'700'000'000, std::size_t width = 200) {
    std::string file;
    for (int i = 0; i < count; ++i) {
        auto line = fmt::format(R"({{"id":"e{}","ts":{},"pad":")", i, first + i);
        line.append(width > line.size() + 3 ? width - line.size() - 3 : 0, 'x');
        file += line + "\"}\n";
    }
    return file;
}

std::uint64_t offset_of_line(const std::string& file, int line) { // 0-based
    std::uint64_t at = 0;
    for (int i = 0; i < line; ++i)
        at = file.find('\n', at) + 1;
    return at;
}

} // namespace

TEST_CASE("a file in order is cut at the first line of the window and the first after it") {
    auto file = log_of(20000); // 4 MB: the search bisects before it scans
    record::TimeWindow window{at_second(1'700'000'000 + 12345), at_second(1'700'000'000 + 15000)};
    auto cut = cut_to_window(reading(file), file.size(), "day.ndjson", window, by_ts());
    CHECK(cut.start == offset_of_line(file, 12345));
    CHECK(cut.end == offset_of_line(file, 15000));
    CHECK(cut.lines_before == 12345);
    CHECK(cut.records_before == 12345);
    CHECK(cut.records_after == 5000);
    CHECK(cut.cuts(file.size()));
}

TEST_CASE("blank lines count for positions, not as records; a last line without newline counts") {
    std::string file = "\n" + log_of(3) + "\n" + log_of(2, 1'700'000'003);
    file.pop_back(); // no newline at the end
    record::TimeWindow window{at_second(1'700'000'002), at_second(1'700'000'004)};
    auto cut = cut_to_window(reading(file), file.size(), "f", window, by_ts());
    CHECK(cut.lines_before == 3); // the blank line and two records
    CHECK(cut.records_before == 2);
    CHECK(cut.records_after == 1); // the last, unterminated line
}

TEST_CASE("a window holding everything, or nothing, cuts accordingly") {
    auto file = log_of(100);
    record::TimeWindow all{at_second(1), std::nullopt};
    auto cut = cut_to_window(reading(file), file.size(), "f", all, by_ts());
    CHECK_FALSE(cut.cuts(file.size()));
    record::TimeWindow later{at_second(1'800'000'000), std::nullopt};
    cut = cut_to_window(reading(file), file.size(), "f", later, by_ts());
    CHECK(cut.start == file.size());
    CHECK(cut.records_before == 100);
    record::TimeWindow earlier{std::nullopt, at_second(1)};
    cut = cut_to_window(reading(file), file.size(), "f", earlier, by_ts());
    CHECK(cut.start == 0);
    CHECK(cut.end == 0);
    CHECK(cut.records_after == 100);
}

TEST_CASE("a line without an event time is never skipped by the last, line-by-line stretch") {
    auto file = log_of(5);
    file.insert(offset_of_line(file, 2), "{\"id\":\"no time\"}\n");
    record::TimeWindow window{at_second(1'700'000'004), std::nullopt};
    auto cut = cut_to_window(reading(file), file.size(), "f", window, by_ts());
    CHECK(cut.start == offset_of_line(file, 2)); // read by the run, which rejects it
    CHECK(cut.records_before == 2);
}

TEST_CASE("a file the search finds out of order is refused, naming where") {
    auto file = log_of(20000);
    // The second half is a day earlier: every probe there contradicts the first half.
    file = file.substr(offset_of_line(file, 10000)) + log_of(10000, 1'700'000'000 - 86400);
    record::TimeWindow window{at_second(1'700'000'000 + 5000), std::nullopt};
    try {
        (void)cut_to_window(reading(file), file.size(), "day.ndjson", window, by_ts());
        FAIL("no error");
    } catch (const InputError& error) {
        CHECK(error.position().source == "day.ndjson");
        CHECK(std::string(error.what()).find("not in time order") != std::string::npos);
    }
}

TEST_CASE("the newest event time of a file in order is its last timed line's") {
    auto file = log_of(10) + "{\"id\":\"untimed\"}\n\n";
    auto newest = last_event_time(reading(file), file.size(), by_ts());
    REQUIRE(newest);
    CHECK(*newest == at_second(1'700'000'009));
    std::string none = "{\"id\":1}\n";
    CHECK_FALSE(last_event_time(reading(none), none.size(), by_ts()));
}

} // namespace idem::run
