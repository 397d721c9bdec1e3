// dedup --counts (detail/key_counts.hpp).

#include "idem/dedup/detail/key_counts.hpp"

#include "idem/record/annotate.hpp"
#include "idem/record/key.hpp"

#include <fmt/format.h>

namespace idem::dedup::detail {

std::uint32_t KeyCounts::source_index(const std::string& source) {
    // Records come file by file: the last one named is nearly always it.
    if (m_sources.empty() || m_sources.back() != source) m_sources.push_back(source);
    return static_cast<std::uint32_t>(m_sources.size() - 1);
}

void KeyCounts::add(const record::Fingerprint& fingerprint, std::string_view key,
                    const std::string& source, std::uint64_t line, std::optional<Timestamp> time) {
    Sighting seen{source_index(source), line, time};
    auto [found, added] =
        m_index.try_emplace(fingerprint.bytes, static_cast<std::uint32_t>(m_entries.size()));
    if (added) m_entries.push_back({std::string(key), 0, seen, seen});
    auto& entry = m_entries[found->second];
    ++entry.count;
    entry.last = seen;
}

void KeyCounts::append_sighting(std::string& out, const Sighting& sighting) const {
    out += R"({"at":)";
    record::append_json_string(out,
                               fmt::format("{}:{}", m_sources[sighting.source], sighting.line));
    if (sighting.time) {
        out += R"(,"time":")";
        append_rfc3339(out, *sighting.time);
        out += '"';
    }
    out += '}';
}

void KeyCounts::write(io::Sink& out, std::size_t key_paths) const {
    // "idem-key/1 key s4:pi_A": the values after the domain (record/key.hpp).
    constexpr std::string_view k_keyed = "idem-key/1 key ";
    std::string line;
    for (const auto& entry : m_entries) {
        line.assign(R"({"key":)");
        if (key_paths > 0 && std::string_view(entry.key).starts_with(k_keyed))
            line += record::encoded_values_json(std::string_view(entry.key).substr(k_keyed.size()),
                                                key_paths);
        else
            record::append_json_string(line, entry.key);
        fmt::format_to(std::back_inserter(line), R"(,"count":{},"first":)", entry.count);
        append_sighting(line, entry.first);
        line += R"(,"last":)";
        append_sighting(line, entry.last);
        line += '}';
        out.write_record(line);
    }
}

} // namespace idem::dedup::detail
