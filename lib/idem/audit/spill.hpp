#pragma once
// Bounded memory for audit (docs/audit.md, "Scale"). Once more records have
// been read than fit (--spill-after), each record goes to one of a number of
// partition files (spill_partitions) by the hash of its key, and again by
// the hash of its fingerprint; groups are then found one partition at a
// time, since records that share a key (or a fingerprint) share a
// partition. Only the records that end up in groups come back into
// memory, for the report.

#include "idem/audit/per_delivery.hpp"
#include "idem/audit/report.hpp"
#include "idem/io/spill.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::audit {

struct SpilledRecord {
    std::uint64_t seq = 0; // input order
    Findings::Position position;
    std::optional<Timestamp> time;
    std::uint64_t payload = 0;
    std::string_view key, fingerprint; // encoded texts; "" when absent
    // Interned by the caller in input order, as the in-memory path does: some
    // explanations break ties by source id.
    std::uint32_t source = 0;
    std::uint16_t status = 0; // what the receiver answered (explain.hpp)
    DeliveryTrace trace;      // endpoint and subscription interned like sources
};

struct SpillLayout {
    bool by_fingerprint = false; // --fingerprint given
    bool keys_given = false;     // --key given
    std::size_t key_paths = 0;   // for the key texts the report shows
    std::size_t fingerprint_paths = 0;
};

// How many partition files each of `partitionings` (1; 2 with
// --fingerprint, by key and by fingerprint) writes for a spill of about
// `expected_records` records (nullopt: not known, as from a pipe), in a
// process that may hold `open_files` descriptors. About 40k rows each: a
// partition's id tables (its rows' hashes, the table of first rows) then
// stay within a core's cache while its texts are numbered (10M events:
// 0.98 of the wall with 256 against 64, and 395 MiB at peak against 514).
// At least 64, so a partition of a 100M-record log still fits in memory
// easily; at most 256, since every file keeps a write buffer of its own
// while the input is read, and partitions of a few thousand rows cost
// more than they save (1M events with 256: 1.10 of the time with 64).
// Every file is open while the input is read: above 64, only as many as
// leave 64 descriptors for the rest of the run (inputs, outputs, stores).
[[nodiscard]] std::size_t spill_partitions(std::optional<std::uint64_t> expected_records,
                                           std::size_t partitionings = 1,
                                           std::uint64_t open_files = io::open_files_limit());

class Spill {
public:
    // Creates `partitions` files a partitioning (by key, by fingerprint;
    // spill_partitions() says how many) in a fresh directory under
    // `directory` (removed again by the destructor); the report is the
    // same whatever their count. Throws FileSystemError.
    Spill(SpillLayout layout, const std::filesystem::path& directory, std::size_t partitions);
    ~Spill();
    Spill(const Spill&) = delete;
    Spill& operator=(const Spill&) = delete;

    // Throws FileSystemError (a full disk, say).
    void add(const SpilledRecord& record);

    // What the groups on disk need from the run to be read back as
    // findings: the tables of inputs and sources, and the counts.
    struct Context {
        ExplainOptions options;
        std::vector<std::string> inputs;
        std::vector<std::string> sources;
        std::uint64_t records = 0;
        std::uint64_t identified = 0; // records with an intent
        const ReplayLedger* replayed = nullptr;
        const KeptVerdicts* verdicts = nullptr;
        const PayloadDifferences* differences = nullptr; // filled before rendering
        // Payloads without the per-delivery fields, as groups compare them.
        const PerDelivery* per_delivery = nullptr;
        // When given, filled with what the groups say of their payloads, as
        // read (per_delivery.hpp): a run that learns fields from it explains
        // the groups again with them.
        PayloadSurvey* survey = nullptr;
    };

    // Finds and explains every group, partition by partition on `threads`
    // threads, writing them to a file of groups in partition order; returns
    // them worst first, with the summary. The report read from them is the
    // one the in-memory path gives for the same records. Throws
    // FileSystemError.
    std::unique_ptr<GroupShelf> explain_groups(Context context, FindingsSummary& summary,
                                               std::size_t threads);

private:
    struct Partitions;
    SpillLayout m_layout;
    io::SpillDirectory m_directory; // removed last, with every file in it
    std::unique_ptr<Partitions> m_by_key, m_by_fingerprint;
    // Explained groups, read back by the report (through a mapping of the
    // whole file): the Spill outlives the report's shelf.
    std::optional<io::SpillFile> m_groups_file;
};

} // namespace idem::audit
