#include "idem/util/time.hpp"

#include <atomic>
#include <fstream>
#include <iterator>
#include <mutex>
#include <sys/stat.h>

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace idem {

namespace {

struct Unit {
    std::string_view name;
    Duration length;
};

constexpr Unit k_units[] = {
    {"ns", Duration(0)}, // handled specially: below our resolution
    {"us", Duration(1)},
    {"ms", Duration(1000)},
    {"s", std::chrono::seconds(1)},
    {"m", std::chrono::minutes(1)},
    {"h", std::chrono::hours(1)},
    {"d", std::chrono::hours(24)},
    {"w", std::chrono::hours(24 * 7)},
};

[[noreturn]] void throw_bad_duration(std::string_view text) {
    throw UsageError(fmt::format(
        "invalid duration {}: expected a number and a unit, such as 300ms, 5m, 24h or 7d",
        quote(text)));
}

} // namespace

Duration parse_duration(std::string_view text) {
    std::string_view rest = trim(text);
    if (rest == "0") return Duration(0);
    if (rest.empty()) throw_bad_duration(text);
    Duration total(0);
    while (!rest.empty()) {
        double number = 0;
        auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), number);
        if (error != std::errc{} || number < 0) throw_bad_duration(text);
        rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
        std::size_t unit_length = 0;
        while (unit_length < rest.size() &&
               std::isalpha(static_cast<unsigned char>(rest[unit_length])))
            ++unit_length;
        auto unit_name = rest.substr(0, unit_length);
        rest.remove_prefix(unit_length);
        const Unit* unit = nullptr;
        for (const auto& candidate : k_units)
            if (candidate.name == unit_name) unit = &candidate;
        if (unit == nullptr) throw_bad_duration(text);
        double micros = unit->name == "ns" ? number / 1000.0
                                           : number * static_cast<double>(unit->length.count());
        if (micros > 1e17) throw UsageError(fmt::format("duration {} is too long", quote(text)));
        total += Duration(static_cast<Duration::rep>(std::llround(micros)));
    }
    return total;
}

std::string format_duration(Duration duration) {
    using namespace std::chrono;
    if (duration.count() == 0) return "0s";
    std::string out;
    if (duration < Duration(0)) {
        out = "-";
        duration = -duration;
    }
    if (duration < seconds(1)) {
        if (duration % milliseconds(1) == Duration(0))
            return out + fmt::format("{}ms", duration_cast<milliseconds>(duration).count());
        return out + fmt::format("{}us", duration.count());
    }
    auto days_part = duration_cast<days>(duration);
    duration -= days_part;
    auto hours_part = duration_cast<hours>(duration);
    duration -= hours_part;
    auto minutes_part = duration_cast<minutes>(duration);
    duration -= minutes_part;
    auto millis = duration_cast<milliseconds>(duration);
    if (days_part.count()) out += fmt::format("{}d", days_part.count());
    if (hours_part.count()) out += fmt::format("{}h", hours_part.count());
    if (minutes_part.count()) out += fmt::format("{}m", minutes_part.count());
    if (millis.count()) {
        if (millis % seconds(1) == milliseconds(0))
            out += fmt::format("{}s", millis.count() / 1000);
        else
            out += fmt::format("{:.3f}s", static_cast<double>(millis.count()) / 1000.0);
    }
    return out;
}

namespace {

bool read_digits(std::string_view& text, std::size_t count, int& value) {
    if (text.size() < count) return false;
    value = 0;
    for (std::size_t i = 0; i < count; ++i) {
        char c = text[i];
        if (c < '0' || c > '9') return false;
        value = value * 10 + (c - '0');
    }
    text.remove_prefix(count);
    return true;
}

bool expect_char(std::string_view& text, char expected) {
    if (text.empty() || text.front() != expected) return false;
    text.remove_prefix(1);
    return true;
}

std::optional<Timestamp> parse_rfc3339(std::string_view text) {
    int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
    if (!read_digits(text, 4, year) || !expect_char(text, '-') || !read_digits(text, 2, month) ||
        !expect_char(text, '-') || !read_digits(text, 2, day))
        return std::nullopt;
    if (text.empty() || (text.front() != 'T' && text.front() != 't' && text.front() != ' '))
        return std::nullopt;
    text.remove_prefix(1);
    if (!read_digits(text, 2, hour) || !expect_char(text, ':') || !read_digits(text, 2, minute) ||
        !expect_char(text, ':') || !read_digits(text, 2, second))
        return std::nullopt;
    std::int64_t micros = 0;
    if (!text.empty() && text.front() == '.') {
        text.remove_prefix(1);
        int digits = 0;
        while (!text.empty() && text.front() >= '0' && text.front() <= '9') {
            if (digits < 6) micros = micros * 10 + (text.front() - '0');
            ++digits;
            text.remove_prefix(1);
        }
        if (digits == 0) return std::nullopt;
        for (int i = digits; i < 6; ++i)
            micros *= 10;
    }
    int offset_minutes = 0;
    if (text == "Z" || text == "z") {
        text = {};
    } else if (!text.empty() && (text.front() == '+' || text.front() == '-')) {
        int sign = text.front() == '-' ? -1 : 1;
        text.remove_prefix(1);
        int offset_hours = 0, offset_mins = 0;
        if (!read_digits(text, 2, offset_hours) || !expect_char(text, ':') ||
            !read_digits(text, 2, offset_mins) || !text.empty())
            return std::nullopt;
        if (offset_hours > 23 || offset_mins > 59) return std::nullopt;
        offset_minutes = sign * (offset_hours * 60 + offset_mins);
    } else if (!text.empty()) {
        return std::nullopt;
    } // no offset at all (SQL's "2026-11-30 09:00:00", CURRENT_TIMESTAMP): UTC
    using namespace std::chrono;
    year_month_day date{std::chrono::year{year}, std::chrono::month{static_cast<unsigned>(month)},
                        std::chrono::day{static_cast<unsigned>(day)}};
    if (!date.ok() || hour > 23 || minute > 59 || second > 60) return std::nullopt;
    auto at = sys_days{date} + hours{hour} + minutes{minute} + seconds{second} +
              microseconds{micros} - minutes{offset_minutes};
    return time_point_cast<microseconds>(at);
}

} // namespace

Timestamp timestamp_from_epoch_number(double value) {
    double magnitude = std::fabs(value);
    double micros = 0;
    if (magnitude < 1e11)
        micros = value * 1e6;
    else if (magnitude < 1e14)
        micros = value * 1e3;
    else if (magnitude < 1e17)
        micros = value;
    else
        micros = value / 1e3;
    return Timestamp(Duration(static_cast<Duration::rep>(std::llround(micros))));
}

std::optional<Timestamp> parse_timestamp(std::string_view text) {
    text = trim(text);
    if (text.empty()) return std::nullopt;
    bool numeric = true;
    for (char c : text)
        if (!((c >= '0' && c <= '9') || c == '.' || c == '-')) numeric = false;
    if (numeric && text.find('-', 1) == std::string_view::npos) {
        double value = 0;
        auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (error != std::errc{} || end != text.data() + text.size() || !std::isfinite(value))
            return std::nullopt;
        if (std::fabs(value) > 9.2e18) return std::nullopt;
        return timestamp_from_epoch_number(value);
    }
    return parse_rfc3339(text);
}

bool lacks_utc_offset(std::string_view text) {
    text = trim(text);
    // yyyy-mm-ddThh:mm:ss[.f]: the time part ends in a digit, not Z or +hh:mm.
    if (text.size() < 19 || (text[10] != 'T' && text[10] != 't' && text[10] != ' ')) return false;
    auto time = text.substr(11);
    return !time.empty() && time.back() >= '0' && time.back() <= '9' &&
           time.find_first_of("+-Zz") == std::string_view::npos;
}

Timestamp parse_timestamp_flag(std::string_view flag, std::string_view text) {
    auto parsed = parse_timestamp(text);
    if (!parsed)
        throw UsageError(fmt::format("{}: invalid time {}: expected RFC 3339 such as "
                                     "2026-11-30T08:00:00Z, or epoch seconds",
                                     flag, quote(text)));
    return *parsed;
}

namespace {
constexpr std::array<std::string_view, 12> k_http_months = {
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
constexpr std::array<std::string_view, 7> k_http_weekdays = {"Sun", "Mon", "Tue", "Wed",
                                                             "Thu", "Fri", "Sat"};
} // namespace

std::optional<Timestamp> parse_http_date(std::string_view text) {
    text = trim(text);
    if (text.size() != 29 || text[3] != ',' || text.substr(25) != " GMT") return std::nullopt;
    auto number = [&](std::size_t at, std::size_t length) -> std::optional<int> {
        int value = 0;
        auto [end, error] = std::from_chars(text.data() + at, text.data() + at + length, value);
        if (error != std::errc() || end != text.data() + at + length) return std::nullopt;
        return value;
    };
    auto day = number(5, 2);
    auto month_name = text.substr(8, 3);
    auto year = number(12, 4);
    auto hour = number(17, 2);
    auto minute = number(20, 2);
    auto second = number(23, 2);
    auto month = std::find(k_http_months.begin(), k_http_months.end(), month_name);
    if (!day || !year || !hour || !minute || !second || month == k_http_months.end())
        return std::nullopt;
    using namespace std::chrono;
    year_month_day date{
        std::chrono::year(*year),
        std::chrono::month(static_cast<unsigned>(month - k_http_months.begin() + 1)),
        std::chrono::day(static_cast<unsigned>(*day))};
    if (!date.ok() || *hour > 23 || *minute > 59 || *second > 60) return std::nullopt;
    return time_point_cast<Duration>(sys_days(date) + hours(*hour) + minutes(*minute) +
                                     seconds(*second));
}

std::string format_http_date(Timestamp at) {
    using namespace std::chrono;
    auto day_point = floor<days>(at);
    year_month_day date{day_point};
    hh_mm_ss time{floor<seconds>(at - day_point)};
    weekday day_of_week{day_point};
    return fmt::format("{}, {:02d} {} {:04d} {:02d}:{:02d}:{:02d} GMT",
                       k_http_weekdays[day_of_week.c_encoding()], static_cast<unsigned>(date.day()),
                       k_http_months[static_cast<unsigned>(date.month()) - 1],
                       static_cast<int>(date.year()), time.hours().count(), time.minutes().count(),
                       time.seconds().count());
}

std::string format_rfc3339(Timestamp at) {
    std::string out;
    append_rfc3339(out, at);
    return out;
}

void append_rfc3339(std::string& out, Timestamp at) {
    using namespace std::chrono;
    auto day_point = floor<days>(at);
    year_month_day date{day_point};
    hh_mm_ss time{floor<milliseconds>(at - day_point)};
    int year = static_cast<int>(date.year());
    if (year < 0 || year > 9999) { // outside what four digits spell
        fmt::format_to(std::back_inserter(out), "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z", year,
                       static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()),
                       time.hours().count(), time.minutes().count(), time.seconds().count(),
                       time.subseconds().count());
        return;
    }
    // "YYYY-MM-DDTHH:MM:SS.mmmZ" by hand: reports write one per record.
    char text[24];
    auto put = [&](std::size_t at_index, long long value, int digits) {
        for (int i = digits - 1; i >= 0; --i) {
            text[at_index + static_cast<std::size_t>(i)] = static_cast<char>('0' + value % 10);
            value /= 10;
        }
    };
    put(0, year, 4);
    text[4] = '-';
    put(5, static_cast<unsigned>(date.month()), 2);
    text[7] = '-';
    put(8, static_cast<unsigned>(date.day()), 2);
    text[10] = 'T';
    put(11, time.hours().count(), 2);
    text[13] = ':';
    put(14, time.minutes().count(), 2);
    text[16] = ':';
    put(17, time.seconds().count(), 2);
    text[19] = '.';
    put(20, time.subseconds().count(), 3);
    text[23] = 'Z';
    out.append(text, sizeof text);
}

namespace {
// Read on every thread that asks the time; set once, before any runs.
std::atomic<Duration::rep> g_clock_offset{0};

// IDEM_NOW=@FILE: the offset is FILE's text, read again whenever the file
// changes (its inode, size or modification time), so a test moves a running
// process's clock by replacing the file. Off, the clock costs one relaxed
// load more.
struct ClockFile {
    std::mutex mutex;
    std::string path;
    struct Version {
        ino_t inode = 0;
        off_t size = -1;
        std::int64_t modified_ns = 0;
        bool operator==(const Version&) const = default;
    } seen;
};
std::atomic<bool> g_clock_file_on{false};

ClockFile& clock_file() {
    static ClockFile file;
    return file;
}

// A file that cannot be read or parsed leaves the offset as it was: a test
// replaces the file whole (rename), so a half-written one is never seen.
void reread_clock_file() {
    auto& file = clock_file();
    std::lock_guard lock(file.mutex);
    struct stat status {};
    if (::stat(file.path.c_str(), &status) != 0) return;
    ClockFile::Version version{status.st_ino, status.st_size,
                               static_cast<std::int64_t>(status.st_mtim.tv_sec) * 1'000'000'000 +
                                   status.st_mtim.tv_nsec};
    if (version == file.seen) return;
    std::ifstream in(file.path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    try {
        set_clock_offset(parse_clock_offset(trim(text)));
        file.seen = version;
    } catch (const Error&) {
    }
}

Duration clock_offset() {
    if (g_clock_file_on.load(std::memory_order_acquire)) reread_clock_file();
    return Duration(g_clock_offset.load(std::memory_order_relaxed));
}
} // namespace

Timestamp now_utc() {
    return std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now()) +
           clock_offset();
}

std::chrono::steady_clock::time_point steady_now() {
    return std::chrono::steady_clock::now() + clock_offset();
}

void set_clock_offset(Duration offset) {
    g_clock_offset.store(offset.count(), std::memory_order_relaxed);
}

Duration parse_clock_offset(std::string_view text) {
    if (text.starts_with('+') || text.starts_with('-')) {
        auto offset = parse_duration(text.substr(1));
        return text.front() == '-' ? -offset : offset;
    }
    auto at = parse_timestamp_flag("IDEM_NOW", text);
    return at - std::chrono::time_point_cast<Duration>(std::chrono::system_clock::now());
}

void set_clock_file(std::string path) {
    if (path.empty()) {
        g_clock_file_on.store(false, std::memory_order_release);
        return;
    }
    {
        auto& file = clock_file();
        std::lock_guard lock(file.mutex);
        file.path = std::move(path);
        file.seen = {};
    }
    g_clock_file_on.store(true, std::memory_order_release);
    reread_clock_file();
}

Duration round_up_to_written_duration(Duration at_least) {
    using namespace std::chrono;
    static const Duration k_steps[] = {
        seconds(1), seconds(5),  seconds(10), seconds(30), minutes(1), minutes(2),
        minutes(5), minutes(10), minutes(15), minutes(30), hours(1),   hours(2),
        hours(6),   hours(12),   hours(24),   hours(48),   hours(72),  hours(168)};
    for (auto step : k_steps)
        if (at_least <= step) return step;
    auto days = duration_cast<Duration>(hours(24));
    return days * ((at_least.count() + days.count() - 1) / days.count());
}

std::vector<Covering> covering_durations(std::vector<std::int64_t> delays) {
    std::vector<Covering> covering;
    if (delays.empty()) return covering;
    std::sort(delays.begin(), delays.end());
    for (double coverage : {0.99, 0.999, 1.0}) {
        auto rank =
            static_cast<std::size_t>(std::ceil(coverage * static_cast<double>(delays.size())));
        rank = std::clamp<std::size_t>(rank, 1, delays.size());
        covering.push_back({coverage, round_up_to_written_duration(Duration(delays[rank - 1]))});
    }
    return covering;
}

} // namespace idem
