#include "idem/reconcile/spill.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/key_index.hpp"

#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <limits>
#include <unistd.h>

namespace idem::reconcile {

namespace {

std::FILE* open_file(const std::filesystem::path& path) {
    auto* file = std::fopen(path.c_str(), "w+b");
    if (!file)
        throw FileSystemError(fmt::format("cannot create the spill file {}: {}", path.string(),
                                          std::strerror(errno)));
    return file;
}

void write_all(std::FILE* file, const void* bytes, std::size_t size,
               const std::filesystem::path& directory) {
    if (size > 0 && std::fwrite(bytes, 1, size, file) != size)
        throw FileSystemError(fmt::format("cannot write to the spill directory {} (is the disk "
                                          "full? --spill-dir puts it elsewhere)",
                                          directory.string()));
}

} // namespace

KeySpill::KeySpill(const std::filesystem::path& directory, std::size_t stages)
    : m_stages(stages) {
    std::error_code error;
    for (int attempt = 0; attempt < 100; ++attempt) {
        auto candidate = directory / fmt::format("idem-reconcile-{}-{}", ::getpid(), attempt);
        if (std::filesystem::create_directory(candidate, error)) {
            m_directory = candidate;
            break;
        }
    }
    if (m_directory.empty())
        throw FileSystemError(fmt::format("cannot create a spill directory under {}",
                                          directory.string()));
    try {
        for (std::size_t p = 0; p < k_partitions; ++p)
            m_files.push_back(open_file(m_directory / fmt::format("keys-{:02}", p)));
    } catch (...) {
        for (auto* file : m_files)
            std::fclose(file);
        std::filesystem::remove_all(m_directory, error);
        throw;
    }
}

KeySpill::~KeySpill() {
    for (auto* file : m_files)
        std::fclose(file);
    for (auto* file : m_latencies)
        if (file) std::fclose(file);
    std::error_code ignored;
    std::filesystem::remove_all(m_directory, ignored);
}

void KeySpill::add(const CarriedKey& key) {
    auto partition = KeyIndex::hash_of(key.key) % k_partitions;
    auto bytes = encode_carried(key);
    auto key_size = static_cast<std::uint32_t>(key.key.size());
    auto bytes_size = static_cast<std::uint32_t>(bytes.size());
    auto* file = m_files[partition];
    write_all(file, &key_size, sizeof key_size, m_directory);
    write_all(file, key.key.data(), key.key.size(), m_directory);
    write_all(file, &bytes_size, sizeof bytes_size, m_directory);
    write_all(file, bytes.data(), bytes.size(), m_directory);
    m_bytes += sizeof key_size + key.key.size() + sizeof bytes_size + bytes.size();
}

void KeySpill::read(std::size_t partition, const std::function<void(const CarriedKey&)>& take) {
    auto* file = m_files[partition];
    if (std::fflush(file) != 0 || std::fseek(file, 0, SEEK_SET) != 0)
        throw FileSystemError(fmt::format("cannot read back the spill directory {}",
                                          m_directory.string()));
    std::string key, bytes;
    auto read_text = [&](std::string& text) {
        std::uint32_t size = 0;
        if (std::fread(&size, sizeof size, 1, file) != 1) return false;
        text.resize(size);
        return size == 0 || std::fread(text.data(), 1, size, file) == size;
    };
    while (read_text(key)) {
        if (!read_text(bytes))
            throw FileSystemError(fmt::format("the spill file of partition {} in {} is cut short",
                                              partition, m_directory.string()));
        auto decoded = decode_carried(key, bytes, m_stages);
        if (!decoded)
            throw FileSystemError(fmt::format("the spill file of partition {} in {} is damaged",
                                              partition, m_directory.string()));
        take(*decoded);
    }
    // Done with it: its disk space back before the next partition is read.
    if (std::fflush(file) != 0 || ::ftruncate(::fileno(file), 0) != 0) {
        // Not fatal: the directory is removed at the end anyway.
    }
}

std::FILE* KeySpill::latency_file(std::size_t hop) {
    if (m_latencies.size() <= hop) {
        m_latencies.resize(hop + 1, nullptr);
        m_latency_counts.resize(hop + 1, 0);
    }
    if (!m_latencies[hop])
        m_latencies[hop] = open_file(m_directory / fmt::format("latencies-{}", hop));
    return m_latencies[hop];
}

void KeySpill::add_latencies(std::size_t hop, const std::vector<std::int64_t>& latencies) {
    if (latencies.empty()) return;
    write_all(latency_file(hop), latencies.data(), latencies.size() * sizeof(std::int64_t),
              m_directory);
    m_latency_counts[hop] += latencies.size();
}

std::optional<double> KeySpill::latency_percentile(std::size_t hop, double fraction) {
    if (hop >= m_latencies.size() || !m_latencies[hop] || m_latency_counts[hop] == 0)
        return std::nullopt;
    auto* file = m_latencies[hop];
    auto count = m_latency_counts[hop];
    auto rank = static_cast<std::uint64_t>(std::ceil(fraction * static_cast<double>(count)));
    rank = std::clamp<std::uint64_t>(rank, 1, count);
    auto value = nth_value(count, rank, [&](const std::function<void(std::int64_t)>& see) {
        if (std::fflush(file) != 0 || std::fseek(file, 0, SEEK_SET) != 0)
            throw FileSystemError(fmt::format("cannot read back the spill directory {}",
                                              m_directory.string()));
        std::vector<std::int64_t> chunk(1 << 16);
        std::size_t got = 0;
        while ((got = std::fread(chunk.data(), sizeof(std::int64_t), chunk.size(), file)) > 0)
            for (std::size_t i = 0; i < got; ++i)
                see(chunk[i]);
        std::fseek(file, 0, SEEK_END);
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
