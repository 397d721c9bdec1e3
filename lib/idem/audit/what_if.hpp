#pragma once
// `audit --what-if ttl=5m,1h,24h` and `--suggest` (docs/audit.md, "Which TTL
// would have caught it?"): the log judged again as a dedup by key with
// other TTLs would have judged it, and the TTL that would have caught 99%,
// 99.9% and all of its duplicates, each with what it costs to hold. Pure.

#include "idem/audit/explain.hpp"
#include "idem/util/string_map.hpp"
#include "idem/util/time.hpp"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::audit {

// Up to this many --what-if key=... alternatives.
inline constexpr std::size_t k_max_what_if_keys = 4;

struct WhatIfOptions {
    std::vector<Duration> ttls; // --what-if ttl=...
    // --what-if key=PATHS: each an alternative idempotency key (its paths'
    // text), judged as dedup would with `key_ttl` (the run's --ttl).
    std::vector<std::string> keys;
    Duration key_ttl = std::chrono::hours(24);
    bool suggest = false;
    std::size_t examples = 5; // missed duplicates shown per setting
};

// About what a fingerprint costs held in each store (docs/audit.md says how
// these were measured): the figures the memory cost is given in.
// Its slot in a process's index (about 13 bytes) and its row and saved
// slot on disk (about 85): docs/dedup.md, "The SQLite store's memory".
inline constexpr std::uint64_t k_bytes_per_fingerprint_sqlite = 100;
inline constexpr std::uint64_t k_bytes_per_fingerprint_redis = 200; // a small hash, in Redis

struct WhatIf {
    struct Missed {
        std::string key;         // as the report shows keys (JSON)
        Duration after_claim{0}; // how long after the claim it outlived the copy came
    };
    struct Setting {
        Duration ttl{0};
        std::uint64_t duplicates = 0, caught = 0, missed = 0;
        std::vector<Missed> examples; // the longest-delayed misses
        std::uint64_t held = 0;       // fingerprints alive at once, at the log's rate
    };
    struct Suggestion {
        double coverage = 0; // 0.99, 0.999, 1
        Duration ttl{0};     // rounded up to a duration people write
        std::uint64_t held = 0;
    };
    // --what-if key=PATHS: the log deduplicated by another key.
    struct KeySetting {
        std::string key;           // the paths, as given
        Duration ttl{0};           // the run's --ttl
        std::uint64_t records = 0; // records that have this key
        std::uint64_t duplicates = 0, caught = 0, missed = 0;
        // Groups under this key whose copies differ in payload: different
        // intents it would have swallowed as "duplicates".
        std::uint64_t conflicting_groups = 0;
        std::uint64_t swallowed = 0;                // copies in those groups unlike their first
        std::vector<std::string> conflict_examples; // keys, as the report shows them
        std::vector<Missed> examples;
    };
    std::vector<Setting> settings;
    std::vector<KeySetting> keys;
    std::vector<Suggestion> suggestions;
    // Delays of duplicates after their key's first copy, by decade:
    // <1s, <10s, <1m, <10m, <1h, <10h, <100h, >=100h.
    std::array<std::uint64_t, 8> delays{};
    std::uint64_t timed_duplicates = 0; // duplicates with a time (the rest cannot be judged)
};

inline constexpr const char* k_delay_buckets[8] = {"<1s", "<10s", "<1min", "<10min",
                                                   "<1h", "<10h", "<100h", ">=100h"};

class WhatIfJudge {
public:
    explicit WhatIfJudge(WhatIfOptions options);

    // One key group: the times of its copies, in any order (copies with no
    // time are left out by the caller), and the key as the report shows it.
    void add_key_group(std::string_view key, std::vector<Timestamp> times);
    // The whole log: its first and last event time, and its distinct keys,
    // for the rate at which fingerprints are claimed.
    [[nodiscard]] WhatIf finish(std::optional<Timestamp> first, std::optional<Timestamp> last,
                                std::uint64_t keys) const;

private:
    WhatIfOptions m_options;
    std::vector<WhatIf::Setting> m_settings;
    std::vector<std::int64_t> m_delays; // microseconds after the first copy
};

// --what-if key=PATHS: every record's value of another key, its time and
// intent, then dedup's verdicts under it (first copies claim for the TTL,
// as add_key_group judges). A record's intent is what the causes call one
// intent: its fingerprint when --fingerprint is given, else its payload,
// told apart in finish() as the groups tell them (without per-delivery
// fields), so the what-if never calls "another intent" what the causes
// call one. Memory: the group's key text, its first intent and 8 bytes per
// timed copy.
class AlternativeKeyJudge {
public:
    AlternativeKeyJudge(std::string paths, Duration ttl, std::size_t examples);
    // The first record of one intent in a group: the intent, the record's
    // place in the input and where it lies.
    struct FirstOfIntent {
        std::uint64_t intent = 0;
        std::uint64_t seq = 0;
        RecordPosition position;
    };
    // `key` is the record's encoded values at the paths ("" when missing).
    void add(std::string_view key, std::optional<Timestamp> time, const FirstOfIntent& record);
    // Each group whose copies carry more than one intent, the first record
    // of each intent first-come first.
    void for_each_mixed(const std::function<void(const std::vector<FirstOfIntent>&)>& visit) const;
    // `same_as(intent)`: the intent as groups compare it (payloads without
    // per-delivery fields); the intent itself when not given.
    [[nodiscard]] WhatIf::KeySetting
    finish(const std::function<std::uint64_t(std::uint64_t)>& same_as = {}) const;

private:
    struct Group {
        std::vector<std::int64_t> times; // microseconds, of the timed copies
        std::uint64_t copies = 0;
        FirstOfIntent first;
        // Copies of intents other than the first's: each intent's first
        // record and its copies (most groups have none).
        std::vector<std::pair<FirstOfIntent, std::uint64_t>> others;
    };
    std::string m_paths;
    Duration m_ttl;
    std::size_t m_examples;
    std::uint64_t m_records = 0;
    StringMap<Group> m_groups; // looked up by the record's text, no string built
};

// A TTL people would write, at least `at_least` (util/time.hpp).
[[nodiscard]] inline Duration round_up_ttl(Duration at_least) {
    return round_up_to_written_duration(at_least);
}

} // namespace idem::audit
