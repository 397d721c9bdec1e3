#pragma once
// Internal to dedup: `--counts FILE`, one line per key with how many
// records carried it and where and when its first and last copies came
// (docs/dedup.md) -- the `uniq -c` or GROUP BY ... HAVING a user would
// otherwise write with jq. The table holds every distinct key of the input
// in memory (its encoded key, two positions and two times: ~120 bytes plus
// the key), so it is built only when asked for.

#include "idem/io/sink.hpp"
#include "idem/record/key.hpp"
#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::dedup::detail {

class KeyCounts {
public:
    // One record carrying `key` (its idem-key/1 encoding) at `source`:`line`.
    void add(const record::Fingerprint& fingerprint, std::string_view key,
             const std::string& source, std::uint64_t line, std::optional<Timestamp> time);

    // One NDJSON line per key, in the order the keys first came: the key
    // as the records hold it (the value of one --key path, an array of
    // several), else (the whole event keyed) its encoding.
    void write(io::Sink& out, std::size_t key_paths) const;

    [[nodiscard]] std::size_t keys() const { return m_entries.size(); }

private:
    struct Sighting {
        std::uint32_t source = 0; // in m_sources
        std::uint64_t line = 0;
        std::optional<Timestamp> time;
    };
    struct Entry {
        std::string key;
        std::uint64_t count = 0;
        Sighting first, last;
    };

    std::uint32_t source_index(const std::string& source);
    void append_sighting(std::string& out, const Sighting& sighting) const;

    std::vector<Entry> m_entries;
    std::unordered_map<record::FingerprintBytes, std::uint32_t, record::FingerprintBytesHash>
        m_index;
    std::vector<std::string> m_sources;
};

} // namespace idem::dedup::detail
