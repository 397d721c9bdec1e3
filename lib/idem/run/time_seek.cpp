#include "idem/run/time_seek.hpp"

#include "idem/io/block_reader.hpp"
#include "idem/record/event_time.hpp"
#include "idem/record/parser.hpp"
#include "idem/util/errors.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>
#include <utility>
#include <vector>

namespace idem::run {

namespace {

constexpr std::size_t k_chunk = 1 << 20;
// A line longer than this is not timed by the search: the cut never passes it.
constexpr std::size_t k_max_probe_line = 1 << 20;
// Bounds closer than this are searched line by line.
constexpr std::uint64_t k_scan_bytes = 1 << 18;
// A probe reads this many lines at most to find one with an event time.
constexpr int k_probe_lines = 16;

struct Line {
    std::uint64_t start = 0;
    std::uint64_t next = 0;           // after its newline (or the end of the file)
    std::optional<std::string> bytes; // nullopt: longer than k_max_probe_line
};

struct Probe {
    std::uint64_t start = 0;
    std::uint64_t next = 0;
    Timestamp time;
};

// A file's lines, read where the search asks, timed by the run's rule.
class Lines {
public:
    Lines(const ReadAt& read_at, std::uint64_t size, const TimeOrder& order)
        : m_read_at(read_at), m_size(size), m_order(order), m_chunk(k_chunk) {}

    [[nodiscard]] std::uint64_t size() const { return m_size; }

    // The start of the first line that starts at or after `offset`.
    std::uint64_t line_start_from(std::uint64_t offset) {
        if (offset == 0) return 0;
        for (auto at = offset - 1; at < m_size;) {
            auto bytes = bytes_from(at);
            if (bytes.empty()) break;
            if (auto newline = bytes.find('\n'); newline != std::string_view::npos)
                return at + newline + 1;
            at += bytes.size();
        }
        return m_size;
    }

    Line line_at(std::uint64_t start) {
        Line line{start, m_size, std::string()};
        for (auto at = start; at < m_size;) {
            auto bytes = bytes_from(at);
            if (bytes.empty()) break;
            auto newline = bytes.find('\n');
            auto taken = newline == std::string_view::npos ? bytes.size() : newline;
            if (line.bytes) {
                if (line.bytes->size() + taken > k_max_probe_line)
                    line.bytes.reset();
                else
                    line.bytes->append(bytes.substr(0, taken));
            }
            at += taken;
            if (newline != std::string_view::npos) {
                line.next = at + 1;
                break;
            }
        }
        return line;
    }

    std::optional<Timestamp> time_of(const Line& line) {
        if (!line.bytes) return std::nullopt;
        m_padded.assign(*line.bytes);
        m_padded.append(io::k_padding_bytes, ' ');
        if (m_parser.parse(std::string_view(m_padded.data(), line.bytes->size())))
            return std::nullopt;
        auto time =
            record::event_time(m_parser, m_order.time_field ? &*m_order.time_field : nullptr,
                               m_order.zone ? &*m_order.zone : nullptr);
        return time.time;
    }

    // The first line in [from, limit) with an event time, within a few.
    std::optional<Probe> first_timed(std::uint64_t from, std::uint64_t limit) {
        for (int i = 0; i < k_probe_lines && from < limit; ++i) {
            auto line = line_at(from);
            if (auto time = time_of(line)) return Probe{line.start, line.next, *time};
            from = line.next;
        }
        return std::nullopt;
    }

    // Lines in [from, to), and those not blank; `to` is a line start or
    // the end of the file.
    std::pair<std::uint64_t, std::uint64_t> count(std::uint64_t from, std::uint64_t to) {
        std::uint64_t lines = 0, records = 0;
        bool content = false, partial = false;
        for (auto at = from; at < to;) {
            auto chunk = bytes_from(at);
            if (chunk.empty()) break;
            chunk = chunk.substr(0, std::min<std::uint64_t>(chunk.size(), to - at));
            auto got = chunk.size();
            while (!chunk.empty()) {
                auto newline = chunk.find('\n');
                auto segment = chunk.substr(0, newline);
                if (!content && !io::is_blank_line(segment)) content = true;
                if (newline == std::string_view::npos) {
                    partial = true;
                    break;
                }
                ++lines;
                records += content ? 1 : 0;
                content = partial = false;
                chunk.remove_prefix(newline + 1);
            }
            at += got;
        }
        if (partial) {
            ++lines;
            records += content ? 1 : 0;
        }
        return {lines, records};
    }

private:
    // The file's bytes from `at` on (at least one unless it ends there): a
    // window of one read, kept for the lines next to it.
    std::string_view bytes_from(std::uint64_t at) {
        if (at < m_cached_at || at >= m_cached_at + m_cached_size) {
            m_cached_at = at;
            m_cached_size = at < m_size ? m_read_at(at, m_chunk.data(), m_chunk.size()) : 0;
        }
        return {m_chunk.data() + (at - m_cached_at), m_cached_size - (at - m_cached_at)};
    }

    const ReadAt& m_read_at;
    std::uint64_t m_size;
    const TimeOrder& m_order;
    std::vector<char> m_chunk;
    std::uint64_t m_cached_at = 0;
    std::size_t m_cached_size = 0;
    std::string m_padded;
    record::RecordParser m_parser;
};

// Which side of the cut a line without an event time falls on: the run
// reads it (and rejects it) either way.
enum class Untimed { ends_the_skip, is_read_on };

// Binary search for the first line at or after `threshold`, then line by
// line over the last stretch; every line timed on the way is kept in
// `seen` for the order check.
std::uint64_t first_line_from(Lines& lines, Timestamp threshold, Untimed untimed, std::uint64_t low,
                              std::uint64_t high,
                              std::vector<std::pair<std::uint64_t, Timestamp>>& seen) {
    while (high - low > k_scan_bytes) {
        auto middle = lines.line_start_from(low + (high - low) / 2);
        if (middle >= high) break;
        auto probe = lines.first_timed(middle, high);
        if (!probe) break; // untimed lines here: the scan below stops at them
        seen.emplace_back(probe->start, probe->time);
        if (probe->time < threshold)
            low = probe->next;
        else
            high = middle;
    }
    auto at = low;
    while (at < high) {
        auto line = lines.line_at(at);
        if (line.bytes && io::is_blank_line(*line.bytes)) {
            at = line.next;
            continue;
        }
        auto time = lines.time_of(line);
        if (!time && untimed == Untimed::ends_the_skip) break;
        if (time && *time >= threshold) break;
        if (time) seen.emplace_back(at, *time);
        at = line.next;
    }
    return at;
}

void check_order(std::vector<std::pair<std::uint64_t, Timestamp>>& seen, const std::string& name) {
    std::sort(seen.begin(), seen.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (std::size_t i = 1; i < seen.size(); ++i)
        if (seen[i].second < seen[i - 1].second)
            throw InputError(
                {name, 0, 0, seen[i].first},
                fmt::format("--sorted: the line at byte {} has an earlier event time ({}) than "
                            "the one at byte {} ({}): the file is not in time order, so cutting "
                            "it to --since/--until would lose records; drop --sorted to read "
                            "every line",
                            seen[i].first, format_rfc3339(seen[i].second), seen[i - 1].first,
                            format_rfc3339(seen[i - 1].second)));
}

} // namespace

WindowCut cut_to_window(const ReadAt& read_at, std::uint64_t size, const std::string& name,
                        const record::TimeWindow& window, const TimeOrder& order) {
    Lines lines(read_at, size, order);
    WindowCut cut;
    cut.end = size;
    std::vector<std::pair<std::uint64_t, Timestamp>> seen;
    // The file's first and last stretches are read too, for the order
    // check: a search that never left one half would see only that half.
    for (auto from : {std::uint64_t{0}, lines.line_start_from(size - std::min(size, k_scan_bytes))})
        if (auto probe = lines.first_timed(from, size))
            seen.emplace_back(probe->start, probe->time);
    if (window.since)
        cut.start = first_line_from(lines, *window.since, Untimed::ends_the_skip, 0, size, seen);
    if (window.until)
        cut.end = first_line_from(lines, *window.until, Untimed::is_read_on, cut.start, size, seen);
    check_order(seen, name);
    if (cut.start > 0) std::tie(cut.lines_before, cut.records_before) = lines.count(0, cut.start);
    if (cut.end < size) cut.records_after = lines.count(cut.end, size).second;
    return cut;
}

std::optional<Timestamp> last_event_time(const ReadAt& read_at, std::uint64_t size,
                                         const TimeOrder& order) {
    Lines lines(read_at, size, order);
    // The lines of the file's last stretch, newest first.
    auto from = size > k_max_probe_line ? lines.line_start_from(size - k_max_probe_line) : 0;
    std::vector<std::uint64_t> starts;
    for (auto at = from; at < size;) {
        starts.push_back(at);
        at = lines.line_at(at).next;
    }
    int tried = 0;
    for (auto start = starts.rbegin(); start != starts.rend() && tried < k_probe_lines; ++start) {
        auto line = lines.line_at(*start);
        if (line.bytes && io::is_blank_line(*line.bytes)) continue;
        ++tried;
        if (auto time = lines.time_of(line)) return time;
    }
    return std::nullopt;
}

ReadAt read_at_fd(int fd, const std::string& name) {
    return [fd, name](std::uint64_t offset, char* to, std::size_t size) {
        std::size_t done = 0;
        while (done < size) {
            auto got = ::pread(fd, to + done, size - done, static_cast<off_t>(offset + done));
            if (got < 0 && errno == EINTR) continue;
            if (got < 0)
                throw InputError({name, 0, 0, offset},
                                 fmt::format("cannot read: {}", std::strerror(errno)));
            if (got == 0) break;
            done += static_cast<std::size_t>(got);
        }
        return done;
    };
}

} // namespace idem::run
