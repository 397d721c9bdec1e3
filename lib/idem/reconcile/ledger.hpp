#pragma once
// What `idem reconcile` knows of each key (docs/reconcile.md), as pure
// logic: at which stages it was seen, how often, when, and with what
// payload; and what that says: lost, duplicated, late, orphan, changed.

#include "idem/util/huge_pages.hpp"
#include "idem/util/key_index.hpp"
#include "idem/util/time.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace idem::reconcile {

inline constexpr std::size_t k_max_stages = 8;
inline constexpr std::size_t k_groups_shown = 20;

// One stage's sightings of one key.
struct Sighting {
    std::uint32_t count = 0;
    bool timed = false;
    std::int64_t first_us = 0, last_us = 0; // event time of the first and last copy
    std::uint64_t payload = 0;              // of the first copy (0: none)
};

enum class Finding : std::uint8_t { lost, duplicated, late, orphan, changed };
inline constexpr std::size_t k_finding_kinds = 5;
[[nodiscard]] std::string_view finding_name(Finding finding);
[[nodiscard]] std::optional<Finding> parse_finding(std::string_view name);

// A key an earlier run settled (seen through, or lost past the grace),
// remembered for --remember so that a later run tells a key seen again
// from a new one: where it was seen and when, and when it settled.
struct RememberedKey {
    struct Stage {
        std::uint32_t count = 0;
        std::int64_t first_us = 0; // 0: seen without a time
    };
    std::vector<Stage> stages;
    std::int64_t settled_us = 0; // its latest event time
    std::uint64_t run = 0;       // which run settled it (its inputs' digest)
};
// The bytes a store keeps for a remembered key (18 + 12 per stage), and back.
[[nodiscard]] std::string encode_remembered(const RememberedKey& remembered);
[[nodiscard]] std::optional<RememberedKey> decode_remembered(std::string_view bytes,
                                                             std::size_t stages);

// Remembered keys in memory, compactly: a week of keys is millions, so a
// key costs its name, an index slot and 12 bytes per stage, not a node.
class RememberedKeys {
public:
    explicit RememberedKeys(std::size_t stages = 1) : m_stages(std::max<std::size_t>(stages, 1)) {}
    void add(std::string_view key, const RememberedKey& remembered);
    struct View {
        const RememberedKey::Stage* stages;
        std::int64_t settled_us;
    };
    [[nodiscard]] std::optional<View> find(std::string_view key) const;
    [[nodiscard]] std::size_t size() const { return m_keys.size(); }
    // Each key with when it settled.
    template <typename Visit> void for_each(Visit visit) const {
        for (std::uint32_t i = 0; i < m_keys.size(); ++i)
            visit(m_keys.name(i), m_settled_us[i]);
    }

private:
    std::size_t m_stages;
    KeyIndex m_keys;
    std::vector<RememberedKey::Stage> m_stage_rows; // m_stages per key
    std::vector<std::int64_t> m_settled_us;
};

struct LedgerOptions {
    std::vector<std::string> stages; // in flow order
    // Hand back the keys still pending at the end (Reconciliation::carry),
    // for the next run (T+1 with a store).
    bool carry_pending = false;
    Duration grace = std::chrono::minutes(15); // absent downstream this long (event time): lost
    std::optional<Duration> sla;               // a hop slower than this: late
    std::size_t examples = 20;                 // keys kept per finding, for the report
    // With a store: keys earlier runs settled (none: not remembered). A key
    // of this run seen there at a stage is duplicated there; one seen
    // there upstream is no orphan, and one seen there downstream no loss.
    const RememberedKeys* remembered = nullptr;
    Duration remember{}; // how long they count after they settled, by event time
    // Hand back the keys this run settled (Reconciliation::settled).
    bool report_settled = false;
};

// The figures of one hop, stage N to N+1.
inline constexpr const char* k_latency_buckets[8] = {"<10ms", "<100ms", "<1s", "<10s",
                                                     "<1min", "<10min", "<1h", ">=1h"};

struct Hop {
    std::string from, to;
    std::uint64_t keys = 0;    // distinct keys at `from`
    std::uint64_t reached = 0; // of those, seen at `to`
    std::uint64_t lost = 0;    // absent at `to` past the grace
    std::uint64_t pending = 0; // absent, but still within the grace
    std::uint64_t late = 0;
    std::uint64_t changed = 0;
    std::uint64_t amplified = 0; // keys seen more often at `to` than at `from`
    double loss_rate = 0;
    std::optional<double> p50_ms, p95_ms, p99_ms; // hop latency, first copy to first copy
    // How many keys took how long, by decade (k_latency_buckets).
    std::array<std::uint64_t, 8> latency_histogram{};
    std::map<std::string, std::uint64_t> lost_by_hour; // "2026-11-30T08" -> lost keys
    std::map<std::string, std::uint64_t> keys_by_hour; // ... -> timed keys at `from`
    // With --by: per group, keys at `from` and how many were lost, most
    // lost first (at most k_groups_shown, the rest summed as "(others)").
    struct Group {
        std::string name;
        std::uint64_t keys = 0, lost = 0;
    };
    std::vector<Group> by_group;
};

struct StageFigures {
    std::string name;
    // duplicated_keys: keys whose duplication began here (more copies than
    // the stage before had), and extra_copies the copies made here;
    // carried_copies: extra copies that came from the stage before.
    std::uint64_t records = 0, keys = 0, duplicated_keys = 0, extra_copies = 0, orphans = 0;
    std::uint64_t carried_copies = 0;
    double duplicate_ratio = 0; // extra copies made here / records
};

struct Example {
    std::string key;
    std::string stage; // where the finding is (the hop's first stage for lost and late)
    std::string detail;
};

// For stages read from traces: of the traces a service's span should have
// been in, how many lack it (the seeds' "missing-span ratio per service").
struct ServiceFigures {
    std::string service;
    std::uint64_t expected = 0, missing = 0;
    double missing_ratio = 0;
};

// A key still within --grace at the end of a run, kept for the next run,
// with the findings already reported on it (so that none is reported twice).
// `reported`: bit s (s < 8) duplicated at stage s; bit 8 + h late at hop h;
// bit 16 + h changed at hop h; bit 24 orphan.
struct CarriedKey {
    std::string key;
    std::vector<Sighting> sightings; // one per stage
    std::string group;               // --by value, "" for none
    std::uint32_t reported = 0;
};
inline constexpr std::uint32_t k_reported_late = 8, k_reported_changed = 16,
                               k_reported_orphan = 1U << 24;

// The bytes a store keeps for a carried key, and back. Decoding checks the
// number of stages; nullopt for bytes that are not one.
[[nodiscard]] std::string encode_carried(const CarriedKey& carried);
[[nodiscard]] std::optional<CarriedKey> decode_carried(std::string key, std::string_view bytes,
                                                       std::size_t stages);

struct Reconciliation {
    std::vector<StageFigures> stages;
    std::vector<Hop> hops;
    std::array<std::uint64_t, k_finding_kinds> counts{};
    std::array<std::vector<Example>, k_finding_kinds> examples;
    std::uint64_t keys = 0;
    // Keys lost at some hop, with the first stage that holds them (for
    // --missing): what to send again.
    std::unordered_map<std::string, std::size_t> missing;
    std::vector<ServiceFigures> services; // stages from traces only
    std::vector<CarriedKey> carry;        // with carry_pending: the keys still pending
    // With report_settled: the keys this run settled, to remember, and
    // when they settled (encode_remembered's bytes, run 0 for the caller to
    // name).
    std::vector<std::tuple<std::string, std::string, std::int64_t>> settled;
    std::uint64_t seen_before = 0; // keys of this run an earlier run settled
    std::uint64_t carried_in = 0;  // keys a previous run handed to this one
    bool carried = false;          // T+1: a store keeps the pending keys
    // Until finish_reconciliation(): each hop's latencies (microseconds).
    std::vector<HugeVector<std::int64_t>> latencies; // a key each: util/huge_pages.hpp
};

// Parts judged apart (the partitions of a spilled run: every key in one
// part only) summed into one; then finish_reconciliation() once.
void add_reconciliation(Reconciliation& total, Reconciliation&& part);
// A hop's latency at a fraction (0.5, 0.95, 0.99) in milliseconds, for
// latencies that are not in memory; none: no latency on that hop.
using Quantile = std::function<std::optional<double>(std::size_t hop, double fraction)>;
// Rates, percentiles (from `latencies`, or from `quantile` when given),
// groups worst first, examples in key order and cut to options.examples.
void finish_reconciliation(Reconciliation& result, const LedgerOptions& options,
                           const Quantile& quantile = {});

class Ledger {
public:
    explicit Ledger(LedgerOptions options);

    // One record of `stage` with `key`, at event time `time` (none: no
    // time), its payload hashed (0: none).
    // `group`: the key's --by value at this stage (the first one seen counts).
    void see(std::size_t stage, std::string_view key, std::optional<Timestamp> time,
             std::uint64_t payload, std::string_view group = {});
    void count_record(std::size_t stage) { ++m_records[stage]; }
    // Asks the CPU for what see() of a key with this hash reads: its slot
    // in the index (some records ahead), then (`near`, a few ahead) its
    // name and sightings, when the slot holds it.
    void prefetch(std::uint64_t hash, bool near) const {
        if (!near) {
            m_keys.prefetch(hash);
            return;
        }
        if (auto index = m_keys.peek(hash); index && (*index + 1) * m_stages <= m_sightings.size())
            idem::prefetch(&m_sightings[*index * m_stages]);
    }
    // A key a previous run left pending, before this run's records.
    void carry_in(const CarriedKey& carried);

    // Everything the keys say, judged at `now` (the latest event time).
    [[nodiscard]] Reconciliation reconcile(std::optional<Timestamp> now) const;
    // The same before finish_reconciliation(): counts, raw latencies, and
    // groups unsorted, to be added to other parts' (add_reconciliation).
    [[nodiscard]] Reconciliation judge(std::optional<Timestamp> now) const;

    // A part of a key's sightings, read back from a spill: added to what
    // the ledger has of it (the earlier part's first copy stays first).
    void merge_in(const CarriedKey& part);
    // Every key's sightings handed out, then forgotten (records counted
    // and keys carried in stay counted): what a spill writes.
    void drain(const std::function<void(const CarriedKey&)>& take);

    [[nodiscard]] std::size_t keys() const { return m_keys.size(); }
    [[nodiscard]] std::uint64_t records(std::size_t stage) const { return m_records[stage]; }
    [[nodiscard]] std::uint64_t carried_in() const { return m_carried_in; }
    // A hint: about this many keys are coming (tables sized once).
    void expect_keys(std::size_t keys);

private:
    class Judgement;

    // Each key's sightings, one per stage, side by side in one array: a key
    // costs its name, an index and 32 bytes per stage, not a node as large
    // as the most stages there could be.
    [[nodiscard]] const Sighting& at(std::uint32_t key, std::size_t stage) const {
        return m_sightings[key * m_stages + stage];
    }

    LedgerOptions m_options;
    std::size_t m_stages;
    KeyIndex m_keys;
    HugeVector<Sighting> m_sightings;     // 96 bytes a key for 3 stages: util/huge_pages.hpp
    KeyIndex m_groups;                    // --by values
    HugeVector<std::uint32_t> m_group_of; // per key: its group's index + 1 (0: none)
    HugeVector<std::uint32_t> m_reported; // per carried key: CarriedKey::reported
    std::uint64_t m_carried_in = 0;
    std::array<std::uint64_t, k_max_stages> m_records{};
};

} // namespace idem::reconcile
