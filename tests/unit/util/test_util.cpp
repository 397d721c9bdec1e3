#include "idem/util/encoding.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"
#include "idem/util/time.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace idem;
using namespace std::chrono;

TEST_CASE("durations: units, combinations and errors") {
    CHECK(parse_duration("300ms") == milliseconds(300));
    CHECK(parse_duration("5m") == minutes(5));
    CHECK(parse_duration("24h") == hours(24));
    CHECK(parse_duration("7d") == hours(24 * 7));
    CHECK(parse_duration("1h30m") == minutes(90));
    CHECK(parse_duration("1.5s") == milliseconds(1500));
    CHECK(parse_duration("0") == Duration(0));
    CHECK_THROWS_WITH_AS(
        (void)parse_duration("5 minutes"),
        "invalid duration '5 minutes': expected a number and a unit, such as 300ms, 5m, 24h or 7d",
        UsageError);
    CHECK_THROWS_AS((void)parse_duration("5"), UsageError);
    CHECK(format_duration(minutes(90)) == "1h30m");
    CHECK(format_duration(milliseconds(300)) == "300ms");
}

TEST_CASE("timestamps: RFC 3339 with any offset, and epoch units told apart by magnitude") {
    auto utc = parse_timestamp("2026-11-30T08:00:00Z");
    REQUIRE(utc);
    CHECK(parse_timestamp("2026-11-30T16:00:00+08:00") == utc);
    CHECK(parse_timestamp("2026-11-30T03:30:00-04:30") == utc);
    CHECK(parse_timestamp("1796025600") == utc);
    CHECK(parse_timestamp("1796025600000") == utc);
    CHECK(parse_timestamp("1796025600000000") == utc);
    CHECK(parse_timestamp("1796025600000000000") == utc);
    CHECK(format_rfc3339(*parse_timestamp("2026-11-30T08:00:00.1234567Z")) ==
          "2026-11-30T08:00:00.123Z");
    CHECK(format_rfc3339(Timestamp{}) == "1970-01-01T00:00:00.000Z");
    CHECK(format_rfc3339(*parse_timestamp("1969-07-20T20:17:40.009Z")) ==
          "1969-07-20T20:17:40.009Z");
    CHECK(format_rfc3339(*parse_timestamp("9999-12-31T23:59:59.999Z")) ==
          "9999-12-31T23:59:59.999Z");
    std::string appended = "at ";
    append_rfc3339(appended, *parse_timestamp("2026-02-03T04:05:06.7Z"));
    CHECK(appended == "at 2026-02-03T04:05:06.700Z");
    CHECK_FALSE(parse_timestamp("2026-13-01T00:00:00Z"));
    CHECK_FALSE(parse_timestamp("2026-11-30 08:00"));
    CHECK_FALSE(parse_timestamp("yesterday"));
}

TEST_CASE("the clock follows its file: a changed file moves both clocks, a bad one leaves them") {
    auto path =
        (std::filesystem::temp_directory_path() / ("idem-clock-" + std::to_string(::getpid())))
            .string();
    auto write = [&](const std::string& text) {
        auto staged = path + ".new";
        std::ofstream(staged) << text;
        std::filesystem::rename(staged, path);
    };
    write("+0s\n");
    set_clock_file(path);
    auto wall = now_utc();
    auto steady = steady_now();
    write("+1h\n");
    CHECK(now_utc() - wall >= hours(1));
    CHECK(now_utc() - wall < hours(1) + minutes(1));
    CHECK(steady_now() - steady >= hours(1));
    write("not a clock");
    CHECK(now_utc() - wall >= hours(1));
    write("-1h");
    CHECK(now_utc() < wall);
    set_clock_file("");
    set_clock_offset(Duration(0));
    CHECK(now_utc() - wall < minutes(1));
    std::filesystem::remove(path);
}

TEST_CASE("hex and base64, both alphabets") {
    CHECK(hex_encode("\x01\xab") == "01ab");
    CHECK(hex_decode("01AB") == std::string("\x01\xab"));
    CHECK_FALSE(hex_decode("0g"));
    CHECK(base64_encode("hello") == "aGVsbG8=");
    CHECK(base64_decode("aGVsbG8=") == std::string("hello"));
    CHECK(base64_decode("aGVsbG8") == std::string("hello"));
    CHECK(base64_decode("-_8") == std::string("\xfb\xff"));
    CHECK_FALSE(base64_decode("a*bc"));
    // The URL-safe alphabet, unpadded, as Sanity writes its signatures.
    CHECK(base64url_encode("\xfb\xff") == "-_8");
    CHECK(base64url_encode("hello") == "aGVsbG8");
    CHECK(base64_decode(base64url_encode("\xfb\xef\xbe")) == std::string("\xfb\xef\xbe"));
}

TEST_CASE("HTTP dates: IMF-fixdate both ways") {
    auto date = parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT");
    REQUIRE(date);
    CHECK(format_rfc3339(*date) == "1994-11-06T08:49:37.000Z");
    CHECK(format_http_date(*date) == "Sun, 06 Nov 1994 08:49:37 GMT");
    // Metronome's test date, and the weekday computed, not copied.
    CHECK(format_http_date(*parse_timestamp("2006-01-02T22:04:05Z")) ==
          "Mon, 02 Jan 2006 22:04:05 GMT");
    CHECK(format_http_date(*parse_timestamp("2024-02-29T23:59:59.999Z")) ==
          "Thu, 29 Feb 2024 23:59:59 GMT");
    CHECK_FALSE(parse_http_date("Sunday, 06-Nov-94 08:49:37 GMT")); // obsolete RFC 850 form
    CHECK_FALSE(parse_http_date("Sun, 31 Feb 1994 08:49:37 GMT"));
    CHECK_FALSE(parse_http_date("Sun, 06 Nov 1994 08:49:37 UTC"));
    CHECK_FALSE(parse_http_date(""));
}

TEST_CASE("messages quote user values with control bytes escaped") {
    CHECK(quote("a'b\x1b[31m") == "'a\\'b\\x1b[31m'");
    CHECK(closest_name("strpe", {"stripe", "slack"}) == "stripe");
    CHECK(closest_name("zzzzzz", {"stripe", "slack"}).empty());
    CHECK(parse_byte_size("16MiB") == 16u << 20);
    CHECK(parse_byte_size("512") == 512);
    CHECK_THROWS_AS((void)parse_byte_size("12 parsecs"), UsageError);
}

TEST_CASE("a value in a text report cannot drive the terminal or break its line") {
    CHECK(terminal_text("ok \xc3\xa9") == "ok \xc3\xa9");
    CHECK(terminal_text("a\x1b[2Jb") == "a\\x1b[2Jb");
    CHECK(terminal_text("line\nFORGED\r\t") == "line\\x0aFORGED\\x0d\\x09");
    CHECK(terminal_text("\xc2\x9b"
                        "31m") == "\\u{009B}31m"); // one-byte CSI
    CHECK(terminal_text("\xe2\x80\xae"
                        "evil") == "\\u{202E}evil"); // bidi override
    CHECK(terminal_text("zero\xe2\x80\x8bwidth\xef\xbb\xbf") == "zero\\u{200B}width\\u{FEFF}");
    CHECK(terminal_text("\x7f\xff") == "\\x7f\\xff");
    // Messages keep their own newlines, and lose the rest likewise.
    CHECK(escape_for_terminal("one\ntwo\xc2\x9b") == "one\ntwo\\u{009B}");
}

TEST_CASE("nfkd: compatibility decomposition of UTF-8 text, and none of what is not UTF-8") {
    CHECK(nfkd("s\xC3\xA9"
               "cret") == std::string("se\xCC\x81"
                                      "cret")); // é -> e + U+0301
    CHECK(nfkd("se\xCC\x81"
               "cret") == std::string("se\xCC\x81"
                                      "cret"));       // already decomposed
    CHECK(nfkd("\xEF\xAC\x81") == std::string("fi")); // the ﬁ ligature
    CHECK(nfkd("plain") == std::string("plain"));
    CHECK_FALSE(nfkd("\xC3").has_value()); // cut in the middle of a character
}
