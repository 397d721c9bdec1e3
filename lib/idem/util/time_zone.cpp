#include "idem/util/time_zone.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

namespace idem {

TimeZone TimeZone::utc() {
    TimeZone zone;
    zone.m_name = "UTC";
    return zone;
}

TimeZone TimeZone::fixed(std::chrono::seconds offset) {
    TimeZone zone;
    zone.m_initial_offset = static_cast<std::int32_t>(offset.count());
    auto minutes = std::abs(offset.count()) / 60;
    zone.m_name =
        fmt::format("{}{:02}:{:02}", offset.count() < 0 ? '-' : '+', minutes / 60, minutes % 60);
    return zone;
}

namespace {

// Big-endian readers over the TZif bytes; nullopt past the end.
struct Reader {
    std::string_view data;
    std::size_t at = 0;
    std::optional<std::uint64_t> unsigned_of(std::size_t bytes) {
        if (at + bytes > data.size()) return std::nullopt;
        std::uint64_t value = 0;
        for (std::size_t i = 0; i < bytes; ++i)
            value = (value << 8) | static_cast<unsigned char>(data[at + i]);
        at += bytes;
        return value;
    }
    bool skip(std::size_t bytes) {
        if (at + bytes > data.size()) return false;
        at += bytes;
        return true;
    }
};

struct Counts {
    std::uint64_t isut = 0, isstd = 0, leap = 0, time = 0, type = 0, chars = 0;
};

std::optional<Counts> read_header(Reader& reader) {
    if (reader.data.substr(reader.at, 4) != "TZif" || !reader.skip(20)) return std::nullopt;
    Counts counts;
    for (auto* field :
         {&counts.isut, &counts.isstd, &counts.leap, &counts.time, &counts.type, &counts.chars}) {
        auto value = reader.unsigned_of(4);
        if (!value) return std::nullopt;
        *field = *value;
    }
    if (counts.type == 0 || counts.type > 256) return std::nullopt;
    return counts;
}

} // namespace

std::optional<TimeZone> TimeZone::from_tzif(std::string_view data, std::string name) {
    Reader reader{data};
    auto first = read_header(reader);
    if (!first || data.size() < 5 || data[4] < '2') return std::nullopt;
    // Skip the version 1 block (32-bit times) to the version 2 one.
    auto v1_bytes = first->time * 5 + first->type * 6 + first->chars + first->leap * 8 +
                    first->isstd + first->isut;
    if (!reader.skip(v1_bytes)) return std::nullopt;
    auto counts = read_header(reader);
    if (!counts) return std::nullopt;
    TimeZone zone;
    zone.m_name = std::move(name);
    std::vector<std::int64_t> times;
    for (std::uint64_t i = 0; i < counts->time; ++i) {
        auto value = reader.unsigned_of(8);
        if (!value) return std::nullopt;
        times.push_back(static_cast<std::int64_t>(*value));
    }
    std::vector<std::uint8_t> types;
    for (std::uint64_t i = 0; i < counts->time; ++i) {
        auto value = reader.unsigned_of(1);
        if (!value || *value >= counts->type) return std::nullopt;
        types.push_back(static_cast<std::uint8_t>(*value));
    }
    std::vector<std::int32_t> offsets;
    for (std::uint64_t i = 0; i < counts->type; ++i) {
        auto offset = reader.unsigned_of(4);
        if (!offset || !reader.skip(2)) return std::nullopt;
        offsets.push_back(static_cast<std::int32_t>(static_cast<std::uint32_t>(*offset)));
    }
    zone.m_initial_offset = offsets.front();
    zone.m_transitions = std::move(times);
    for (auto type : types)
        zone.m_offsets.push_back(offsets[type]);
    return zone;
}

TimeZone TimeZone::load(std::string_view name) {
    if (name == "UTC" || name == "Z" || name == "utc") return utc();
    if (!name.empty() && (name.front() == '+' || name.front() == '-')) {
        if (auto parsed = parse_timestamp(fmt::format("1970-01-01T00:00:00{}", name))) {
            auto offset =
                -std::chrono::duration_cast<std::chrono::seconds>(parsed->time_since_epoch());
            return fixed(offset);
        }
        throw UsageError(
            fmt::format("invalid time zone offset {}: expected +08:00 or -05:30", quote(name)));
    }
    bool safe = name.find("..") == std::string_view::npos && !name.empty() && name.front() != '/';
    std::ifstream file(fmt::format("/usr/share/zoneinfo/{}", name), std::ios::binary);
    if (!safe || !file)
        throw UsageError(
            fmt::format("unknown time zone {}: use an IANA name such as Asia/Shanghai, UTC, or "
                        "an offset such as +08:00",
                        quote(name)));
    std::stringstream contents;
    contents << file.rdbuf();
    auto zone = from_tzif(contents.str(), std::string(name));
    if (!zone)
        throw UsageError(
            fmt::format("time zone {}: the system's zone file is not valid TZif", quote(name)));
    return *zone;
}

std::chrono::seconds TimeZone::offset_at(Timestamp at) const {
    auto seconds = std::chrono::duration_cast<std::chrono::seconds>(at.time_since_epoch()).count();
    auto after = std::upper_bound(m_transitions.begin(), m_transitions.end(), seconds);
    if (after == m_transitions.begin()) return std::chrono::seconds(m_initial_offset);
    return std::chrono::seconds(
        m_offsets[static_cast<std::size_t>(after - m_transitions.begin() - 1)]);
}

std::string calendar_bucket(Timestamp at, const TimeZone& zone, BucketSize size) {
    using namespace std::chrono;
    auto local = time_point_cast<seconds>(at) + zone.offset_at(at);
    auto day = floor<days>(local);
    year_month_day date{day};
    auto text = fmt::format("{:04}-{:02}-{:02}", static_cast<int>(date.year()),
                            static_cast<unsigned>(date.month()), static_cast<unsigned>(date.day()));
    if (size == BucketSize::hour) text += fmt::format("T{:02}", floor<hours>(local - day).count());
    return text;
}

} // namespace idem
