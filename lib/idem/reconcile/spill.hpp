#pragma once
// Bounded memory for reconcile (docs/reconcile.md, "Memory and speed").
// Past --spill-after keys in memory, the ledger's keys go to one of a fixed
// number of partition files by the hash of the key, and the ledger starts
// again; a key seen again later lands in the same partition. At the end
// each partition is read back alone and judged, and the parts are added up
// (add_reconciliation). Hop latencies go to a file per hop, whose exact
// percentiles are found in a few passes over it with a bounded table.

#include "idem/io/spill.hpp"
#include "idem/reconcile/ledger.hpp"

#include <array>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

namespace idem::reconcile {

class KeySpill {
public:
    static constexpr std::size_t k_partitions = 64;

    // Creates the files in a fresh directory under `directory` (removed
    // again by the destructor). Throws FileSystemError.
    KeySpill(const std::filesystem::path& directory, std::size_t stages);
    ~KeySpill();
    KeySpill(const KeySpill&) = delete;
    KeySpill& operator=(const KeySpill&) = delete;

    // Throws FileSystemError (a full disk, say).
    void add(const CarriedKey& key);
    // Every key part of one partition, in the order they were added.
    void read(std::size_t partition, const std::function<void(const CarriedKey&)>& take);
    // How many key parts a partition holds: at least its distinct keys (a
    // key drained twice is two parts), so a ledger sized for it never grows.
    [[nodiscard]] std::uint64_t parts_in(std::size_t partition) const { return m_parts[partition]; }

    // Hop latencies (microseconds), kept on disk.
    void add_latencies(std::size_t hop, std::span<const std::int64_t> latencies);
    // The nearest-rank percentile of a hop's latencies, in milliseconds;
    // exact, the same as sorting them all would give.
    [[nodiscard]] std::optional<double> latency_percentile(std::size_t hop, double fraction);

    [[nodiscard]] std::uint64_t bytes_written() const;

private:
    io::SpillFile& latency_file(std::size_t hop);

    io::SpillDirectory m_directory; // removed last, with every file in it
    io::SpillPartitions m_keys;
    std::size_t m_stages;
    std::vector<std::unique_ptr<io::SpillFile>> m_latencies; // per hop, once it has one
    std::string m_encoded;
    std::array<std::uint64_t, k_partitions> m_parts{}; // key parts added, per partition
};

// The value of nearest rank `rank` (1-based) among `count` values that
// `pass` hands out again each time it is called (the values in any order),
// with a table of at most 65536 counters however many values there are:
// each pass narrows the range the value is in 65536-fold. Exposed for tests.
[[nodiscard]] std::int64_t
nth_value(std::uint64_t count, std::uint64_t rank,
          const std::function<void(const std::function<void(std::int64_t)>&)>& pass);

} // namespace idem::reconcile
