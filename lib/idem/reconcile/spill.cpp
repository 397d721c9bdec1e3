#include "idem/reconcile/spill.hpp"

#include "idem/io/spill.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/key_index.hpp"
#include "idem/util/text.hpp"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>

namespace idem::reconcile {

namespace {

// A key part as the spill keeps it, small because a spill is written and
// read once per key per stage: most parts hold one stage, one copy, one
// time and no payload. varint sizes; then per stage present (a bit in
// `stages`): flags (1 timed, 2 a last time apart, 4 a payload, 8 more than
// one copy), [count varint], [first i64], [last i64], [payload u64]; then
// reported (varint), group (varint size + bytes).
void put_varint(std::string& out, std::uint64_t value) {
    while (value >= 0x80) {
        out += static_cast<char>((value & 0x7f) | 0x80);
        value >>= 7;
    }
    out += static_cast<char>(value);
}

bool take_varint(std::string_view& in, std::uint64_t& value) {
    value = 0;
    for (int shift = 0; shift < 64 && !in.empty(); shift += 7) {
        auto byte = static_cast<unsigned char>(in.front());
        in.remove_prefix(1);
        value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
        if ((byte & 0x80) == 0) return true;
    }
    return false;
}

using io::put_fixed;
using io::take_fixed;

void encode_part(std::string& out, const CarriedKey& key) {
    out.clear();
    put_varint(out, key.key.size());
    out += key.key;
    std::uint8_t stages = 0;
    for (std::size_t s = 0; s < key.sightings.size() && s < 8; ++s)
        if (key.sightings[s].count > 0) stages = static_cast<std::uint8_t>(stages | (1U << s));
    out += static_cast<char>(stages);
    for (std::size_t s = 0; s < key.sightings.size() && s < 8; ++s) {
        const auto& seen = key.sightings[s];
        if (seen.count == 0) continue;
        std::uint8_t flags = (seen.timed ? 1 : 0) |
                             (seen.timed && seen.last_us != seen.first_us ? 2 : 0) |
                             (seen.payload != 0 ? 4 : 0) | (seen.count > 1 ? 8 : 0);
        out += static_cast<char>(flags);
        if (flags & 8) put_varint(out, seen.count);
        if (flags & 1) put_fixed(out, seen.first_us);
        if (flags & 2) put_fixed(out, seen.last_us);
        if (flags & 4) put_fixed(out, seen.payload);
    }
    put_varint(out, key.reported);
    put_varint(out, key.group.size());
    out += key.group;
}

// Reads one part from the front of `in`; false when `in` does not start with one.
bool decode_part(std::string_view& in, CarriedKey& key, std::size_t stages) {
    std::uint64_t size = 0;
    if (!take_varint(in, size) || in.size() < size) return false;
    key.key.assign(in.substr(0, size));
    in.remove_prefix(size);
    std::uint8_t present = 0;
    if (!take_fixed(in, present)) return false;
    key.sightings.assign(stages, Sighting{});
    for (std::size_t s = 0; s < stages && s < 8; ++s) {
        if ((present & (1U << s)) == 0) continue;
        auto& seen = key.sightings[s];
        std::uint8_t flags = 0;
        if (!take_fixed(in, flags)) return false;
        std::uint64_t count = 1;
        if ((flags & 8) && !take_varint(in, count)) return false;
        seen.count = static_cast<std::uint32_t>(count);
        seen.timed = (flags & 1) != 0;
        if (seen.timed && !take_fixed(in, seen.first_us)) return false;
        seen.last_us = seen.first_us;
        if ((flags & 2) && !take_fixed(in, seen.last_us)) return false;
        if ((flags & 4) && !take_fixed(in, seen.payload)) return false;
    }
    std::uint64_t reported = 0;
    if (!take_varint(in, reported) || !take_varint(in, size) || in.size() < size) return false;
    key.reported = static_cast<std::uint32_t>(reported);
    key.group.assign(in.substr(0, size));
    in.remove_prefix(size);
    return true;
}

} // namespace

KeySpill::KeySpill(const std::filesystem::path& directory, std::size_t stages)
    : m_directory(directory, "reconcile"), m_keys(m_directory, "keys", k_partitions),
      m_stages(stages) {}

KeySpill::~KeySpill() = default;

void KeySpill::add(const CarriedKey& key) {
    auto partition = KeyIndex::hash_of(key.key) % k_partitions;
    encode_part(m_encoded, key);
    m_keys.append(partition, m_encoded);
    ++m_parts[partition];
}

std::uint64_t KeySpill::bytes_written() const {
    auto bytes = m_keys.bytes_written();
    for (const auto& file : m_latencies)
        if (file) bytes += file->bytes_written();
    return bytes;
}

void KeySpill::read(std::size_t partition, const std::function<void(const CarriedKey&)>& take) {
    auto& file = m_keys.flushed(partition);
    // A part cut by a piece's end waits for the next.
    HugeVector<char> buffer; // a piece or more: huge pages (util/huge_pages.hpp)
    CarriedKey key;
    file.read_pieces([&](std::string_view piece) {
        buffer.insert(buffer.end(), piece.begin(), piece.end());
        std::string_view rest(buffer.data(), buffer.size());
        while (!rest.empty()) {
            auto before = rest;
            if (!decode_part(rest, key, m_stages)) {
                rest = before;
                break;
            }
            take(key);
        }
        buffer.erase(buffer.begin(),
                     buffer.begin() + static_cast<std::ptrdiff_t>(buffer.size() - rest.size()));
    });
    if (!buffer.empty())
        throw FileSystemError(
            fmt::format("the spill file {} is damaged", quote(file.path().string())));
    file.truncate(); // its disk space back before the next partition is read
}

io::SpillFile& KeySpill::latency_file(std::size_t hop) {
    if (m_latencies.size() <= hop) m_latencies.resize(hop + 1);
    if (!m_latencies[hop])
        m_latencies[hop] =
            std::make_unique<io::SpillFile>(m_directory.path() / fmt::format("latencies-{}", hop));
    return *m_latencies[hop];
}

void KeySpill::add_latencies(std::size_t hop, std::span<const std::int64_t> latencies) {
    if (latencies.empty()) return;
    latency_file(hop).write(latencies.data(), latencies.size() * sizeof(std::int64_t));
}

std::optional<double> KeySpill::latency_percentile(std::size_t hop, double fraction) {
    if (hop >= m_latencies.size() || !m_latencies[hop] || m_latencies[hop]->bytes_written() == 0)
        return std::nullopt;
    auto& file = *m_latencies[hop];
    auto count = file.bytes_written() / sizeof(std::int64_t);
    auto rank = static_cast<std::uint64_t>(std::ceil(fraction * static_cast<double>(count)));
    rank = std::clamp<std::uint64_t>(rank, 1, count);
    auto value = nth_value(count, rank, [&](const std::function<void(std::int64_t)>& see) {
        // Pieces of whole values: a multiple of their size, the last one too.
        file.read_pieces(
            [&](std::string_view piece) {
                for (std::size_t at = 0; at + sizeof(std::int64_t) <= piece.size();
                     at += sizeof(std::int64_t)) {
                    std::int64_t latency = 0;
                    std::memcpy(&latency, piece.data() + at, sizeof latency);
                    see(latency);
                }
            },
            sizeof(std::int64_t) << 16);
    });
    return static_cast<double>(value) / 1000.0;
}

std::int64_t nth_value(std::uint64_t count, std::uint64_t rank,
                       const std::function<void(const std::function<void(std::int64_t)>&)>& pass) {
    constexpr std::uint64_t k_cells = 1 << 16;
    auto smallest = std::numeric_limits<std::int64_t>::max();
    auto largest = std::numeric_limits<std::int64_t>::min();
    pass([&](std::int64_t value) {
        smallest = std::min(smallest, value);
        largest = std::max(largest, value);
    });
    if (count == 0) return 0;
    // Offsets from the smallest value, unsigned: they keep the values'
    // order even across zero, and the whole int64 range fits.
    auto offset_of = [&](std::int64_t value) {
        return static_cast<std::uint64_t>(value) - static_cast<std::uint64_t>(smallest);
    };
    // The value's offset lies in [low, high].
    std::uint64_t low = 0, high = offset_of(largest);
    std::vector<std::uint64_t> cells(k_cells);
    while (low < high) {
        auto span = high - low; // + 1, which may not fit
        auto width = span < k_cells ? 1 : span / k_cells + 1;
        std::fill(cells.begin(), cells.end(), 0);
        std::uint64_t below = 0;
        pass([&](std::int64_t value) {
            auto offset = offset_of(value);
            if (offset < low) {
                ++below;
                return;
            }
            if (offset > high) return;
            ++cells[(offset - low) / width];
        });
        std::uint64_t seen = below;
        std::size_t cell = 0;
        for (; cell + 1 < k_cells; ++cell) {
            if (seen + cells[cell] >= rank) break;
            seen += cells[cell];
        }
        auto cell_low = low + cell * width;
        auto cell_high = width - 1 > high - cell_low ? high : cell_low + width - 1;
        low = cell_low;
        high = cell_high;
        if (width == 1) break;
    }
    return static_cast<std::int64_t>(static_cast<std::uint64_t>(smallest) + low);
}

} // namespace idem::reconcile
