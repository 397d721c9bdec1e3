// Partition files for audit's bounded-memory path.

#include "idem/audit/spill.hpp"

#include "idem/audit/detail/grouping.hpp"
#include "idem/dedup/fingerprint.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <cerrno>
#include <cstring>
#include <fmt/format.h>
#include <unistd.h>

namespace idem::audit {

namespace {

// Enough that a partition of a 100M-record log fits in memory easily,
// few enough that every file keeps its own write buffer.
constexpr std::size_t k_partitions = 64;

// A row as it is written: fixed fields, then the three texts.
struct RowHeader {
    std::uint64_t seq;
    std::uint64_t number;
    std::int64_t time;
    std::uint64_t payload;
    std::uint32_t input;
    std::uint32_t key_size, fingerprint_size, source;
    std::uint8_t row, has_time, padding[2];
};

struct Row {
    RowHeader header{};
    std::string key, fingerprint;
};

} // namespace

struct Spill::Partitions {
    std::vector<std::FILE*> files;
    std::vector<std::filesystem::path> paths;

    Partitions(const std::filesystem::path& directory, const char* name) {
        for (std::size_t i = 0; i < k_partitions; ++i) {
            auto path = directory / fmt::format("{}-{:02}", name, i);
            auto* file = std::fopen(path.c_str(), "w+b");
            if (!file)
                throw FileSystemError(fmt::format("cannot create spill file {}: {}",
                                                  quote(path.string()), std::strerror(errno)));
            files.push_back(file);
            paths.push_back(path);
        }
    }
    ~Partitions() {
        for (auto* file : files)
            std::fclose(file);
    }

    std::uint64_t write(std::string_view partition_text, const SpilledRecord& record) {
        auto* file = files[std::hash<std::string_view>{}(partition_text) % k_partitions];
        RowHeader header{};
        header.seq = record.seq;
        header.number = record.position.number;
        header.input = record.position.input;
        header.row = record.position.row ? 1 : 0;
        header.has_time = record.time ? 1 : 0;
        header.time = record.time ? record.time->time_since_epoch().count() : 0;
        header.payload = record.payload;
        header.key_size = static_cast<std::uint32_t>(record.key.size());
        header.fingerprint_size = static_cast<std::uint32_t>(record.fingerprint.size());
        header.source = record.source;
        bool written = std::fwrite(&header, sizeof header, 1, file) == 1;
        for (auto text : {record.key, record.fingerprint})
            written = written && std::fwrite(text.data(), 1, text.size(), file) == text.size();
        if (!written)
            throw FileSystemError(fmt::format("cannot write audit's spill files in {}: {}",
                                              quote(paths.front().parent_path().string()),
                                              std::strerror(errno)));
        return sizeof header + record.key.size() + record.fingerprint.size();
    }

    // Every row of partition `index`, in the order written (input order).
    std::vector<Row> read(std::size_t index) {
        auto* file = files[index];
        if (std::fflush(file) != 0 || std::fseek(file, 0, SEEK_SET) != 0)
            throw FileSystemError(fmt::format("cannot read spill file {}: {}",
                                              quote(paths[index].string()), std::strerror(errno)));
        std::vector<Row> rows;
        Row row;
        while (std::fread(&row.header, sizeof row.header, 1, file) == 1) {
            auto read_text = [&](std::string& text, std::uint32_t size) {
                text.resize(size);
                return size == 0 || std::fread(text.data(), 1, size, file) == size;
            };
            if (!read_text(row.key, row.header.key_size) ||
                !read_text(row.fingerprint, row.header.fingerprint_size))
                throw FileSystemError(
                    fmt::format("spill file {} is cut short", quote(paths[index].string())));
            rows.push_back(row);
        }
        return rows;
    }
};

Spill::Spill(SpillLayout layout, const std::filesystem::path& directory) : m_layout(layout) {
    auto pattern = (directory / "idem-audit-XXXXXX").string();
    if (!::mkdtemp(pattern.data()))
        throw FileSystemError(fmt::format("cannot create a spill directory in {}: {}",
                                          quote(directory.string()), std::strerror(errno)));
    m_directory = pattern;
    m_by_key = std::make_unique<Partitions>(m_directory, "key");
    if (layout.by_fingerprint)
        m_by_fingerprint = std::make_unique<Partitions>(m_directory, "fingerprint");
}

Spill::~Spill() {
    m_by_key.reset();
    m_by_fingerprint.reset();
    std::error_code ignored;
    std::filesystem::remove_all(m_directory, ignored);
}

void Spill::add(const SpilledRecord& record) {
    if (!record.key.empty()) m_bytes += m_by_key->write(record.key, record);
    if (m_by_fingerprint && !record.fingerprint.empty())
        m_bytes += m_by_fingerprint->write(record.fingerprint, record);
}

namespace {

// Gathers the groups of all partitions and the records in them.
class GroupCollector {
public:
    GroupCollector(Findings& findings, const SpillLayout& layout)
        : m_findings(findings), m_layout(layout) {}

    // One partition: local ids for keys and fingerprints (consistent within
    // it, which is all explain() needs), global ids for sources.
    void partition(std::vector<Row> rows, GroupKind kind, const ExplainOptions& options) {
        detail::TextColumn keys, fingerprints;
        std::vector<Attempt> attempts(rows.size());
        for (std::size_t i = 0; i < rows.size(); ++i) {
            keys.add(rows[i].key);
            fingerprints.add(rows[i].fingerprint);
            attempts[i].source = rows[i].header.source;
            attempts[i].payload = rows[i].header.payload;
            if (rows[i].header.has_time)
                attempts[i].time = Timestamp(Duration(rows[i].header.time));
        }
        std::vector<std::uint32_t> ids;
        auto distinct_keys = keys.assign_ids(ids);
        for (std::size_t i = 0; i < rows.size(); ++i)
            attempts[i].key = ids[i];
        auto distinct_fingerprints = fingerprints.assign_ids(ids);
        for (std::size_t i = 0; i < rows.size(); ++i)
            attempts[i].fingerprint = ids[i];
        if (kind == GroupKind::key && !m_layout.by_fingerprint) m_findings.intents += distinct_keys;
        if (kind == GroupKind::fingerprint) m_findings.intents += distinct_fingerprints;

        auto field = kind == GroupKind::key ? &Attempt::key : &Attempt::fingerprint;
        for (auto& members : detail::members_by(attempts, field)) {
            if (kind == GroupKind::fingerprint) {
                auto first_key = attempts[members.front()].key;
                bool several_keys = std::any_of(members.begin(), members.end(), [&](std::size_t i) {
                    return attempts[i].key != first_key;
                });
                if (!several_keys && m_layout.keys_given) continue;
            }
            auto group = explain(kind, std::move(members), attempts, options);
            for (auto& index : group.records)
                index = keep(rows[index], attempts[index]);
            m_groups.push_back(std::move(group));
        }
    }

    // Records renumbered in input order, as the in-memory path numbers them.
    void finish() {
        std::vector<std::size_t> order(m_kept.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](std::size_t a, std::size_t b) { return m_kept[a].seq < m_kept[b].seq; });
        std::vector<std::size_t> rank(m_kept.size());
        for (std::size_t i = 0; i < order.size(); ++i)
            rank[order[i]] = i;
        for (auto index : order) {
            m_findings.attempts.push_back(m_kept[index].attempt);
            m_findings.positions.push_back(m_kept[index].position);
        }
        for (auto& group : m_groups)
            for (auto& index : group.records)
                index = rank[index];
        m_findings.groups = std::move(m_groups);
        detail::sort_worst_first(m_findings.groups);
    }

private:
    struct Kept {
        std::uint64_t seq;
        Attempt attempt;
        Findings::Position position;
    };

    // The record's index among kept records; its key and fingerprint get
    // global ids (by text) and the texts the report shows.
    std::size_t keep(const Row& row, const Attempt& local) {
        auto [found, inserted] = m_kept_by_seq.try_emplace(row.header.seq, m_kept.size());
        if (!inserted) return found->second;
        Kept kept{
            row.header.seq, local, {row.header.input, row.header.row != 0, row.header.number}};
        kept.attempt.key = global_id(m_key_ids, row.key, m_findings.key_texts, m_layout.key_paths);
        kept.attempt.fingerprint =
            global_id(m_fingerprint_ids, row.fingerprint, m_findings.fingerprint_texts,
                      m_layout.fingerprint_paths);
        m_kept.push_back(kept);
        return found->second;
    }

    static std::uint32_t global_id(std::unordered_map<std::string, std::uint32_t>& ids,
                                   const std::string& text,
                                   std::unordered_map<std::uint32_t, std::string>& texts,
                                   std::size_t paths) {
        if (text.empty()) return 0;
        auto [found, inserted] = ids.try_emplace(text, static_cast<std::uint32_t>(ids.size() + 1));
        if (inserted) texts.emplace(found->second, dedup::encoded_values_json(text, paths));
        return found->second;
    }

    Findings& m_findings;
    const SpillLayout& m_layout;
    std::vector<Kept> m_kept;
    std::unordered_map<std::uint64_t, std::size_t> m_kept_by_seq;
    std::unordered_map<std::string, std::uint32_t> m_key_ids, m_fingerprint_ids;
    std::vector<Explanation> m_groups;
};

} // namespace

void Spill::group_into(Findings& findings, const ExplainOptions& options) {
    GroupCollector collector(findings, m_layout);
    for (std::size_t i = 0; i < k_partitions; ++i)
        collector.partition(m_by_key->read(i), GroupKind::key, options);
    if (m_by_fingerprint)
        for (std::size_t i = 0; i < k_partitions; ++i)
            collector.partition(m_by_fingerprint->read(i), GroupKind::fingerprint, options);
    collector.finish();
}

} // namespace idem::audit
