// Partition files for audit's bounded-memory path.

#include "idem/audit/spill.hpp"

#include "idem/audit/detail/grouping.hpp"
#include "idem/io/block_reader.hpp"
#include "idem/io/spill.hpp"
#include "idem/record/key.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/ordered_workers.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <bit>
#include <fmt/format.h>
#include <map>
#include <memory>
#include <unordered_map>
#include <xxhash.h>

namespace idem::audit {

namespace {

// A row on disk: first what frames it (the sizes of its texts, whether
// a trace follows), so a partition is walked, and its rows counted by
// their text, without decoding the rest; then the fixed fields (packed,
// no padding), the delivery trace only when it says something (most
// logs carry none, and its 56 bytes were half of every row written and
// read back again), the key and the fingerprint.
struct RowFrame {
    std::uint32_t key_size = 0, fingerprint_size = 0;
    std::uint8_t traced = 0;
};
constexpr std::size_t k_frame_bytes = 2 * sizeof(std::uint32_t) + sizeof(std::uint8_t);

// A row's fields, decoded only for the rows that can be in a group.
struct RowHeader {
    std::uint64_t seq = 0;
    std::uint64_t number = 0;
    std::int64_t time = 0;
    std::uint64_t payload = 0;
    std::uint32_t input = 0;
    std::uint32_t source = 0;
    std::uint8_t row = 0, has_time = 0;
    std::uint16_t status = 0;
    DeliveryTrace trace; // written after the fields only when it says something
    bool traced = false; // whether it was (header_of)
};

// The fixed fields in their order on disk: the one list the writer, the
// reader and the row's size all follow.
template <typename Header, typename Field>
constexpr void for_each_field(Header& header, Field&& field) {
    field(header.seq);
    field(header.number);
    field(header.time);
    field(header.payload);
    field(header.input);
    field(header.source);
    field(header.row);
    field(header.has_time);
    field(header.status);
}

constexpr std::size_t k_fields_bytes = [] {
    RowHeader header;
    std::size_t bytes = 0;
    for_each_field(header, [&](const auto& field) { bytes += sizeof field; });
    return bytes;
}();

// Whether a trace holds anything but its defaults: only then is it written.
bool says_something(const DeliveryTrace& trace) {
    const auto& copy = trace.signed_copy;
    return trace.provider != Provider::unknown || trace.provider_attempt != 0 ||
           trace.endpoint != 0 || trace.subscription != 0 ||
           std::any_of(trace.layers.begin(), trace.layers.end(),
                       [](std::uint8_t layer) { return layer != 0; }) ||
           copy.signed_at != 0 || copy.signature != 0 || copy.body != 0 || copy.canonical != 0 ||
           copy.verdict != SignatureVerdict::unknown;
}

using io::put_fixed;
using io::take_fixed;

FileSystemError cut_short(const io::SpillFile& file) {
    return FileSystemError(fmt::format("spill file {} is cut short", quote(file.path().string())));
}

// A row read back: views of the partition's bytes (PartitionRows).
struct Row {
    std::string_view fields; // the fixed fields and the trace, for header_of()
    std::string_view key, fingerprint;
};

RowHeader header_of(const Row& row) {
    RowHeader header;
    auto in = row.fields;
    // Sizes were checked when the partition was walked (Partitions::read).
    for_each_field(header, [&](auto& field) { take_fixed(in, field); });
    header.traced = !in.empty();
    if (header.traced) take_fixed(in, header.trace);
    return header;
}

// One partition read back whole: rows view `bytes`. With what explaining
// it needs besides, kept by its worker from one partition to the next, so
// no partition faults in (and clears) memory of its own. Read, not
// mapped: on these virtual machines mapping a partition's pages cost
// three times the copy out of the page cache.
struct PartitionRows {
    io::ByteBuffer bytes;
    HugeVector<Row> rows;
    HugeVector<std::uint64_t> hashes;
    std::vector<std::uint32_t> ids, other_ids, firsts;
};

} // namespace

// Rows by the hash of a text (a key, or a fingerprint), on io's spill
// partitions.
struct Spill::Partitions {
    io::SpillPartitions files;

    Partitions(const io::SpillDirectory& directory, const char* name, std::size_t count)
        : files(directory, name, count) {}

    // `traced`: says_something(record.trace), asked once for both files.
    void write(std::string_view partition_text, const SpilledRecord& record, bool traced) {
        auto index = XXH3_64bits(partition_text.data(), partition_text.size()) % files.count();
        RowHeader header;
        header.seq = record.seq;
        header.number = record.position.number;
        header.time = record.time ? record.time->time_since_epoch().count() : 0;
        header.payload = record.payload;
        header.input = record.position.input;
        header.source = record.source;
        header.row = record.position.row ? 1 : 0;
        header.has_time = record.time ? 1 : 0;
        header.status = record.status;
        io::PackedFields<k_frame_bytes + k_fields_bytes + sizeof(DeliveryTrace)> fields;
        fields.put(static_cast<std::uint32_t>(record.key.size()))
            .put(static_cast<std::uint32_t>(record.fingerprint.size()))
            .put(static_cast<std::uint8_t>(traced ? 1 : 0));
        for_each_field(header, [&](const auto& field) { fields.put(field); });
        if (traced) fields.put(record.trace);
        files.append(index, fields.bytes());
        files.append(index, record.key);
        files.append(index, record.fingerprint);
    }

    // Every row of partition `index`, in the order written (input order),
    // framed but not decoded.
    void read(std::size_t index, PartitionRows& out) {
        auto& file = files.flushed(index);
        out.rows.clear();
        std::string_view rest = file.read_all(out.bytes);
        while (!rest.empty()) {
            RowFrame frame;
            if (!take_fixed(rest, frame.key_size) || !take_fixed(rest, frame.fingerprint_size) ||
                !take_fixed(rest, frame.traced))
                throw cut_short(file);
            auto fields = k_fields_bytes + (frame.traced ? sizeof(DeliveryTrace) : 0);
            if (rest.size() <
                fields + std::uint64_t{frame.key_size} + std::uint64_t{frame.fingerprint_size})
                throw cut_short(file);
            out.rows.push_back({rest.substr(0, fields), rest.substr(fields, frame.key_size),
                                rest.substr(fields + frame.key_size, frame.fingerprint_size)});
            rest.remove_prefix(fields + frame.key_size + frame.fingerprint_size);
        }
    }
};

std::size_t spill_partitions(std::optional<std::uint64_t> expected_records,
                             std::size_t partitionings, std::uint64_t open_files) {
    constexpr std::uint64_t k_fewest = 64, k_most = 256, k_rows_each = 40'000, k_kept_open = 64;
    if (!expected_records) return k_fewest;
    auto wanted = std::bit_ceil(std::max<std::uint64_t>(*expected_records / k_rows_each, 1));
    auto room = open_files > k_kept_open
                    ? (open_files - k_kept_open) / std::max<std::size_t>(partitionings, 1)
                    : 0;
    auto most = std::max(k_fewest, std::min(k_most, std::bit_floor(room)));
    return static_cast<std::size_t>(std::clamp(wanted, k_fewest, most));
}

Spill::Spill(SpillLayout layout, const std::filesystem::path& directory, std::size_t partitions)
    : m_layout(layout), m_directory(directory, "audit") {
    m_by_key = std::make_unique<Partitions>(m_directory, "key", partitions);
    if (layout.by_fingerprint)
        m_by_fingerprint = std::make_unique<Partitions>(m_directory, "fingerprint", partitions);
}

Spill::~Spill() = default;

void Spill::add(const SpilledRecord& record) {
    bool traced = says_something(record.trace);
    if (!record.key.empty()) m_by_key->write(record.key, record, traced);
    if (m_by_fingerprint && !record.fingerprint.empty())
        m_by_fingerprint->write(record.fingerprint, record, traced);
}

namespace {

// A value as the group file stores it: a duration as its microseconds,
// an index as 32 bits (a group's records are counted in 32 bits).
template <typename T, typename V> T stored(const V& value) {
    if constexpr (std::is_same_v<V, Duration>)
        return static_cast<T>(value.count());
    else
        return static_cast<T>(value);
}

// Little-endian-as-the-machine bytes for the group file: it lives for one
// run on one machine.
class ByteWriter {
public:
    explicit ByteWriter(std::string& bytes) : m_bytes(bytes) {}
    template <typename T> void put(T value) { put_fixed(m_bytes, value); }
    void put_text(std::string_view text) {
        put(static_cast<std::uint32_t>(text.size()));
        m_bytes.append(text);
    }
    // A list: its count, then each value stored as a T (get_all_into's
    // T), converted on the way without a copy of the list.
    template <typename T, typename V> void put_all(const std::vector<V>& values) {
        put(static_cast<std::uint32_t>(values.size()));
        for (const auto& value : values)
            put(stored<T>(value));
    }
    [[nodiscard]] std::size_t size() const { return m_bytes.size(); }

private:
    std::string& m_bytes;
};

class ByteReader {
public:
    explicit ByteReader(std::string_view bytes) : m_bytes(bytes) {}
    template <typename T> T get() {
        T value{};
        if (!take_fixed(m_bytes, value)) throw FileSystemError("audit's group file is cut short");
        return value;
    }
    std::string_view get_text() {
        auto size = get<std::uint32_t>();
        if (m_bytes.size() < size) throw FileSystemError("audit's group file is cut short");
        auto text = m_bytes.substr(0, size);
        m_bytes.remove_prefix(size);
        return text;
    }
    // A list put_all() wrote, into `values` (replaced, its room kept), each
    // stored T made a V.
    template <typename T, typename V> void get_all_into(std::vector<V>& values) {
        values.resize(get<std::uint32_t>());
        for (auto& value : values)
            value = V(get<T>());
    }

private:
    std::string_view m_bytes;
};

void put_time(ByteWriter& out, const std::optional<Timestamp>& at) {
    out.put<std::uint8_t>(at ? 1 : 0);
    out.put<std::int64_t>(at ? at->time_since_epoch().count() : 0);
}

std::optional<Timestamp> get_time(ByteReader& in) {
    auto present = in.get<std::uint8_t>();
    auto micros = in.get<std::int64_t>();
    if (!present) return std::nullopt;
    return Timestamp(Duration(micros));
}

// Where a group lies in the group file, and what orders it (worst first).
struct GroupIndex {
    std::uint64_t first_seq; // input order of the group's first record
    std::uint64_t offset;
    std::uint32_t records;
    std::uint32_t bytes;
    GroupKind kind;
    bool mixes_payloads; // more than one payload: read by compare_payloads without a load
};

// The report's order (detail::worse_first), as the in-memory path has it.
bool worse_first(const GroupIndex& a, const GroupIndex& b) {
    return detail::worse_first({a.records, a.first_seq, a.kind}, {b.records, b.first_seq, b.kind});
}

// Groups on disk, read back one at a time for the report; every reader (one
// per thread rendering the report) views the group file's one mapping: a
// read per group was a system call per group, most of a small group's cost.
class SpilledGroups final : public GroupShelf {
public:
    // What every reader shares: the file's bytes, the index, the run's tables.
    struct Shelf {
        io::MappedBytes groups; // the Spill's group file, which outlives the report
        HugeVector<GroupIndex> index;
        SpillLayout layout;
        Spill::Context context;
    };

    explicit SpilledGroups(std::shared_ptr<const Shelf> shelf) : m_shelf(std::move(shelf)) {
        const auto& context = m_shelf->context;
        m_current.inputs = context.inputs;
        m_current.sources = context.sources;
        m_current.options = context.options;
        m_current.fingerprinted = m_shelf->layout.by_fingerprint;
        m_current.records = context.records;
        m_current.identified = context.identified;
        m_current.replayed = context.replayed;
        m_current.verdicts = context.verdicts;
        m_current.differences = context.differences;
    }

    [[nodiscard]] std::size_t size() const override { return m_shelf->index.size(); }
    [[nodiscard]] bool mixes_payloads(std::size_t g) const override {
        return m_shelf->index[g].mixes_payloads;
    }

    Shelved at(std::size_t g) override {
        if (m_loaded != g) load(m_shelf->index[g]);
        m_loaded = g;
        return {m_current, m_current.groups.front()};
    }

    [[nodiscard]] std::unique_ptr<GroupShelf> reader() const override {
        return std::make_unique<SpilledGroups>(m_shelf);
    }

private:
    void load(const GroupIndex& where) {
        auto file = m_shelf->groups.bytes();
        if (where.offset > file.size() || file.size() - where.offset < where.bytes)
            throw FileSystemError("audit's group file is cut short");
        ByteReader in(file.substr(where.offset, where.bytes));
        const auto& layout = m_shelf->layout;
        auto& findings = m_current;
        // Everything is refilled in place, group after group, keeping its
        // room: a report loads a group per line, and a fresh explanation
        // each time was a dozen allocations and frees. Texts stay in their
        // maps under ids this group no longer uses, which nothing reads.
        findings.attempts.clear();
        findings.positions.clear();
        findings.groups.resize(1);
        auto& group = findings.groups.front();
        group.kind = static_cast<GroupKind>(in.get<std::uint8_t>());
        group.records.clear();
        auto records = in.get<std::uint32_t>();
        m_key_ids.clear();
        m_fingerprint_ids.clear();
        // The group's own text (its key, or its fingerprint) once, the
        // other after each record.
        bool by_key = group.kind == GroupKind::key;
        auto& own_ids = by_key ? m_key_ids : m_fingerprint_ids;
        auto& other_ids = by_key ? m_fingerprint_ids : m_key_ids;
        auto& own_texts = by_key ? findings.key_texts : findings.fingerprint_texts;
        auto& other_texts = by_key ? findings.fingerprint_texts : findings.key_texts;
        auto own_paths = by_key ? layout.key_paths : layout.fingerprint_paths;
        auto other_paths = by_key ? layout.fingerprint_paths : layout.key_paths;
        auto own = local_id(own_ids, in.get_text(), own_texts, own_paths);
        for (std::uint32_t i = 0; i < records; ++i) {
            Attempt attempt;
            Findings::Position position;
            position.input = in.get<std::uint32_t>();
            position.row = in.get<std::uint8_t>() != 0;
            position.number = in.get<std::uint64_t>();
            attempt.time = get_time(in);
            attempt.payload = in.get<std::uint64_t>();
            attempt.source = in.get<std::uint32_t>();
            attempt.status = in.get<std::uint16_t>();
            if (in.get<std::uint8_t>() != 0) attempt.trace = in.get<DeliveryTrace>();
            auto other = local_id(other_ids, in.get_text(), other_texts, other_paths);
            attempt.key = by_key ? own : other;
            attempt.fingerprint = by_key ? other : own;
            findings.attempts.push_back(attempt);
            findings.positions.push_back(position);
            group.records.push_back(i);
        }
        group.first = get_time(in);
        group.last = get_time(in);
        in.get_all_into<std::int64_t>(group.gaps);
        in.get_all_into<std::uint32_t>(group.sources);
        group.payloads = in.get<std::uint64_t>();
        group.keys = in.get<std::uint64_t>();
        group.causes.resize(in.get<std::uint32_t>());
        for (auto& evidence : group.causes) {
            evidence.cause = static_cast<Cause>(in.get<std::uint8_t>());
            in.get_all_into<std::uint32_t>(evidence.records);
            in.get_all_into<std::int64_t>(evidence.gaps);
            evidence.source = in.get<std::uint32_t>();
            in.get_all_into<std::uint16_t>(evidence.attempt_numbers);
            evidence.detail.assign(in.get_text());
            in.get_all_into<std::uint32_t>(evidence.originals);
        }
    }

    static std::uint32_t local_id(std::unordered_map<std::string_view, std::uint32_t>& ids,
                                  std::string_view text,
                                  std::unordered_map<std::uint32_t, std::string>& texts,
                                  std::size_t paths) {
        if (text.empty()) return 0;
        auto [found, inserted] = ids.try_emplace(text, static_cast<std::uint32_t>(ids.size() + 1));
        if (inserted)
            texts.insert_or_assign(found->second, record::encoded_values_json(text, paths));
        return found->second;
    }

    std::shared_ptr<const Shelf> m_shelf;
    Findings m_current;
    std::unordered_map<std::string_view, std::uint32_t> m_key_ids, m_fingerprint_ids;
    std::size_t m_loaded = static_cast<std::size_t>(-1);
};

// One partition's groups, explained: their bytes for the group file, where
// each starts within those bytes, and what the summary adds up.
struct ExplainedPartition {
    std::string bytes;
    std::vector<GroupIndex> index; // offsets within `bytes`
    std::vector<std::pair<std::uint64_t, std::uint32_t>>
        members; // (seq, source) of grouped records
    std::map<Cause, std::uint64_t> causes;
    std::uint64_t intents = 0;
    PayloadSurvey survey; // of its groups, as read (Context::survey)
};

// A grouped record's fields in the group file, packed: a group's text
// (its key, or its fingerprint) is written once before them, the other
// text after each.
void put_member(std::string& bytes, const RowHeader& header) {
    bool traced = header.traced;
    // Some of a row's fields and a flag: never more than the row holds.
    io::PackedFields<k_fields_bytes + sizeof(DeliveryTrace)> fields;
    fields.put(header.input)
        .put(header.row)
        .put(header.number)
        .put(header.has_time) // the time as put_time() writes it, for get_time()
        .put(header.has_time ? header.time : std::int64_t{0})
        .put(header.payload)
        .put(header.source)
        .put(header.status)
        .put(static_cast<std::uint8_t>(traced ? 1 : 0));
    if (traced) fields.put(header.trace);
    bytes.append(fields.bytes());
}

// A fingerprint partition's ids split into intents within `window`
// (detail::split_by_window), the times read from the rows that share an id.
std::uint32_t split_intents(PartitionRows& partition, std::uint32_t distinct, Duration window) {
    const auto& rows = partition.rows;
    auto& ids = partition.ids;
    std::vector<std::uint8_t> seen(std::size_t{distinct} + 1, 0);
    for (auto id : ids)
        if (id != 0 && seen[id] < 2) ++seen[id];
    std::vector<std::optional<Timestamp>> times(rows.size());
    for (std::size_t i = 0; i < rows.size(); ++i)
        if (seen[ids[i]] == 2) {
            auto header = header_of(rows[i]);
            if (header.has_time) times[i] = Timestamp(Duration(header.time));
        }
    return detail::split_by_window(
        ids, distinct, [&](std::size_t i) { return times[i]; }, window);
}

// Explains one partition. Local ids for keys and fingerprints (consistent
// within it, which is all explain() needs); sources are the run's ids.
// Touches nothing shared: partitions are explained on several threads.
ExplainedPartition explain_partition(PartitionRows& partition, GroupKind kind,
                                     const Spill::Context& context, const SpillLayout& layout) {
    const auto& options = context.options;
    const auto& rows = partition.rows;
    ExplainedPartition out;

    // The partition's own text (its rows' keys, or fingerprints), numbered
    // where it lies in the partition's bytes: no text is copied.
    auto own_text = [&](const Row& row) {
        return kind == GroupKind::key ? row.key : row.fingerprint;
    };
    auto other_text = [&](const Row& row) {
        return kind == GroupKind::key ? row.fingerprint : row.key;
    };
    auto& ids = partition.ids;
    auto distinct = detail::assign_text_ids(
        rows.size(), [&](std::size_t i) { return own_text(rows[i]); }, partition.hashes, ids,
        partition.firsts);
    if (kind == GroupKind::fingerprint)
        distinct = split_intents(partition, distinct, options.window);
    // A fingerprint partition's texts are the run's intents; a key
    // partition's are when no --fingerprint is given.
    if (kind == GroupKind::fingerprint || !layout.by_fingerprint) out.intents += distinct;

    // Only the rows whose text comes twice or more can be in a group, and a
    // group's explanation reads its own records only: the others (most rows
    // of a log) are counted above and go no further, not even decoded.
    // `grouped[i]` is the row of attempt i.
    std::vector<std::uint8_t> seen(std::size_t{distinct} + 1, 0); // 0, 1, or 2: twice or more
    for (auto id : ids)
        if (id != 0 && seen[id] < 2) ++seen[id];
    std::vector<std::size_t> grouped;
    // The room the groups' bytes take (a little more: growing by doubling
    // copied them and faulted in their pages again): each member's fields,
    // flag, text size, gap, source and place in a cause; a group's own text
    // once and its fixed fields. Ids come in order of first appearance: a
    // new highest id is a group's first row.
    std::size_t room = 0;
    std::uint32_t highest = 0;
    for (std::size_t i = 0; i < rows.size(); ++i) {
        if (seen[ids[i]] != 2) continue;
        grouped.push_back(i);
        room += k_fields_bytes + 21 + other_text(rows[i]).size();
        if (ids[i] > highest) {
            highest = ids[i];
            room += 64 + own_text(rows[i]).size();
        }
    }
    // The other text numbered among the grouped rows only: consistent
    // among the records explain() compares, which is all it needs.
    auto& other_ids = partition.other_ids;
    detail::assign_text_ids(
        grouped.size(), [&](std::size_t n) { return other_text(rows[grouped[n]]); },
        partition.hashes, other_ids, partition.firsts);

    std::vector<RowHeader> headers(grouped.size());
    std::vector<Attempt> attempts(grouped.size());
    for (std::size_t n = 0; n < grouped.size(); ++n) {
        auto& header = headers[n] = header_of(rows[grouped[n]]);
        if (context.per_delivery) header.payload = context.per_delivery->class_of(header.payload);
        auto& attempt = attempts[n];
        auto own = ids[grouped[n]];
        attempt.key = kind == GroupKind::key ? own : other_ids[n];
        attempt.fingerprint = kind == GroupKind::key ? other_ids[n] : own;
        attempt.source = header.source;
        attempt.payload = header.payload;
        attempt.status = header.status;
        attempt.trace = header.trace;
        if (header.has_time) attempt.time = Timestamp(Duration(header.time));
        if (context.verdicts)
            attempt.trace.signed_copy.verdict = signature_verdict(
                *context.verdicts, context.inputs, {header.input, header.row != 0, header.number});
    }

    // Each group is written where the partition's bytes end, not built
    // apart and copied there.
    out.bytes.reserve(room);
    ByteWriter bytes(out.bytes);
    std::vector<std::vector<std::size_t>> surveyed; // each group's records, for the survey
    detail::explain_groups(
        kind, attempts, layout.keys_given, options, [&](const Explanation& group) {
            if (context.survey) surveyed.push_back(group.records);
            auto start = bytes.size();
            bytes.put<std::uint8_t>(static_cast<std::uint8_t>(group.kind));
            bytes.put(static_cast<std::uint32_t>(group.records.size()));
            bytes.put_text(own_text(rows[grouped[group.records.front()]]));
            for (auto index : group.records) {
                const auto& row = rows[grouped[index]];
                put_member(out.bytes, headers[index]);
                bytes.put_text(other_text(row));
                out.members.emplace_back(headers[index].seq, headers[index].source);
            }
            put_time(bytes, group.first);
            put_time(bytes, group.last);
            bytes.put_all<std::int64_t>(group.gaps);
            bytes.put_all<std::uint32_t>(group.sources);
            bytes.put(static_cast<std::uint64_t>(group.payloads));
            bytes.put(static_cast<std::uint64_t>(group.keys));
            bytes.put(static_cast<std::uint32_t>(group.causes.size()));
            for (const auto& evidence : group.causes) {
                ++out.causes[evidence.cause];
                bytes.put<std::uint8_t>(static_cast<std::uint8_t>(evidence.cause));
                bytes.put_all<std::uint32_t>(evidence.records);
                bytes.put_all<std::int64_t>(evidence.gaps);
                bytes.put(evidence.source);
                bytes.put_all<std::uint16_t>(evidence.attempt_numbers);
                bytes.put_text(evidence.detail);
                bytes.put_all<std::uint32_t>(evidence.originals);
            }
            out.index.push_back({headers[group.records.front()].seq, start,
                                 static_cast<std::uint32_t>(group.records.size()),
                                 static_cast<std::uint32_t>(bytes.size() - start), group.kind,
                                 group.payloads > 1});
        });
    // Ordered here, on the partition's worker: the run then merges the
    // partitions' ordered runs instead of sorting every group on one thread.
    std::sort(out.index.begin(), out.index.end(), worse_first);
    if (context.survey)
        survey_groups(
            surveyed, kind == GroupKind::key || !layout.keys_given,
            [&](std::size_t n) {
                const auto& header = headers[n];
                return SurveyedRecord{
                    header.seq, header.payload, {header.input, header.row != 0, header.number}};
            },
            out.survey);
    return out;
}

// Writes explained partitions to the group file, in partition order, and
// adds up the summary.
class GroupWriter {
public:
    GroupWriter(io::SpillFile& file, const Spill::Context& context, const SpillLayout& layout,
                FindingsSummary& summary)
        : m_file(file), m_summary(summary), m_survey(context.survey),
          m_by_source(context.sources.size(), 0) {
        // Only with fingerprints is a record in two groups (a key group
        // and a fingerprint group).
        if (layout.by_fingerprint) m_counted.assign(context.records, false);
    }

    void add(ExplainedPartition&& partition) {
        m_file.write(partition.bytes);
        m_starts.push_back(m_index.size());
        for (auto where : partition.index) {
            where.offset += m_offset;
            m_index.push_back(where);
        }
        m_offset += partition.bytes.size();
        // A record in a key group and a fingerprint group counts once.
        for (const auto& [seq, source] : partition.members) {
            if (!m_counted.empty()) {
                if (m_counted[seq]) continue;
                m_counted[seq] = true;
            }
            ++m_by_source[source];
        }
        for (const auto& [cause, count] : partition.causes)
            m_summary.causes[cause] += count;
        m_intents += partition.intents;
        if (m_survey) {
            auto& part = partition.survey;
            m_survey->retried.insert(m_survey->retried.end(), part.retried.begin(),
                                     part.retried.end());
            std::move(part.mixed.begin(), part.mixed.end(), std::back_inserter(m_survey->mixed));
        }
    }

    // The index, worst first, and the summary's totals.
    HugeVector<GroupIndex> finish(const Spill::Context& context) {
        auto index = merge_runs();
        auto& summary = m_summary;
        summary.records = context.records;
        summary.groups = index.size();
        summary.duplicates = context.identified - m_intents;
        summary.duplicate_ratio = summary.records == 0 ? 0
                                                       : static_cast<double>(summary.duplicates) /
                                                             static_cast<double>(summary.records);
        summary.worst = 0;
        for (std::size_t source = 0; source < m_by_source.size(); ++source)
            if (auto count = m_by_source[source])
                summary.sources.emplace_back(
                    context.sources[source].empty() ? "(none)" : context.sources[source], count);
        std::sort(summary.sources.begin(), summary.sources.end(), [](const auto& a, const auto& b) {
            return a.second != b.second ? a.second > b.second : a.first < b.first;
        });
        return index;
    }

private:
    // Every partition's index (each worst first) as one, worst first: the
    // ordered runs, gathered back to back as they came, merged two by two
    // into a second array and back, level after level, each read straight
    // through. A heap of cursors over every run pays a heap's bookkeeping per
    // group, on one thread while the others wait.
    HugeVector<GroupIndex> merge_runs() {
        auto& from = m_index;
        auto starts = std::move(m_starts); // of each run in `from`, then its end
        starts.push_back(from.size());
        HugeVector<GroupIndex> to(from.size());
        while (starts.size() > 2) { // two runs or more
            std::vector<std::size_t> merged;
            std::size_t runs = starts.size() - 1, i = 0;
            auto at = [](auto& array, std::size_t n) {
                return array.begin() + static_cast<std::ptrdiff_t>(n);
            };
            for (; i + 1 < runs; i += 2) {
                merged.push_back(starts[i]);
                std::merge(at(from, starts[i]), at(from, starts[i + 1]), at(from, starts[i + 1]),
                           at(from, starts[i + 2]), at(to, starts[i]), worse_first);
            }
            if (i < runs) { // the odd one, as it is
                merged.push_back(starts[i]);
                std::copy(at(from, starts[i]), from.end(), at(to, starts[i]));
            }
            merged.push_back(from.size());
            std::swap(from, to);
            starts = std::move(merged);
        }
        return std::move(from);
    }

    io::SpillFile& m_file;
    FindingsSummary& m_summary;
    PayloadSurvey* m_survey;     // Context::survey
    std::vector<bool> m_counted; // by input order, with fingerprints: a record counts once
    std::vector<std::uint64_t> m_by_source; // grouped records by source id
    std::uint64_t m_intents = 0;
    HugeVector<GroupIndex> m_index;    // every partition's groups, each run worst first
    std::vector<std::size_t> m_starts; // where each partition's run starts in m_index
    std::uint64_t m_offset = 0;
};

} // namespace

std::unique_ptr<GroupShelf> Spill::explain_groups(Context context, FindingsSummary& summary,
                                                  std::size_t threads) {
    m_groups_file.emplace(m_directory.path() / "groups");
    GroupWriter writer(*m_groups_file, context, m_layout, summary);
    // Partitions are independent: explained on `threads` workers, written
    // in partition order, so the group file is the same whatever the count.
    struct Job {
        Partitions* partitions;
        std::size_t index;
        GroupKind kind;
    };
    std::vector<PartitionRows> rows(threads); // per worker, reused
    OrderedWorkers<Job, ExplainedPartition> pool(
        threads, 2 * threads, [&](Job& job, std::size_t worker) {
            job.partitions->read(job.index, rows[worker]);
            return explain_partition(rows[worker], job.kind, context, m_layout);
        });
    auto submit = [&](Partitions* partitions, GroupKind kind) {
        for (std::size_t i = 0; i < partitions->files.count(); ++i) {
            while (pool.full())
                if (auto finished = pool.next(true)) writer.add(std::move(finished->output));
            pool.submit({partitions, i, kind});
        }
    };
    submit(m_by_key.get(), GroupKind::key);
    if (m_by_fingerprint) submit(m_by_fingerprint.get(), GroupKind::fingerprint);
    while (auto finished = pool.next(true))
        writer.add(std::move(finished->output));
    auto shelf = std::make_shared<SpilledGroups::Shelf>();
    shelf->index = writer.finish(context);
    shelf->groups = m_groups_file->map_all();
    shelf->layout = m_layout;
    shelf->context = std::move(context);
    return std::make_unique<SpilledGroups>(std::move(shelf));
}

} // namespace idem::audit
