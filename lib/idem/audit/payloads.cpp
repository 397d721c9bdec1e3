#include "idem/audit/detail/payloads.hpp"

#include "idem/record/parser.hpp"
#include "idem/record/volatile_fields.hpp"
#include "idem/run/input.hpp"
#include "idem/run/rows.hpp"

#include <algorithm>
#include <charconv>
#include <fmt/format.h>
#include <map>

namespace idem::audit::detail {

namespace {

// The payload of the record `parser` holds, as JSON: the --payload values by
// path, or the canonical event minus what is ignored.
std::optional<nlohmann::json> payload_of(record::RecordParser& parser, const record::KeySpec& spec,
                                         const record::IgnoredPaths& ignored) {
    if (!spec.key_paths.empty()) {
        auto values = nlohmann::json::object();
        for (const auto& path : spec.key_paths) {
            auto value = parser.find(path);
            if (!value) continue;
            values[path.text()] = value->type == record::FieldValue::Type::string
                                      ? nlohmann::json(std::string(value->text))
                                      : nlohmann::json::parse(value->text, nullptr, false);
        }
        return values;
    }
    auto canonical = parser.canonical_event(ignored);
    if (!canonical) return std::nullopt;
    auto json = nlohmann::json::parse(*canonical, nullptr, false);
    if (json.is_discarded()) return std::nullopt;
    return json;
}

} // namespace

record::KeySpec payload_spec(const AuditRunOptions& options,
                             const std::vector<record::FieldPath>& row_identity) {
    record::KeySpec spec;
    if (!options.payload_fields.empty()) {
        spec.key_paths = options.payload_fields;
        return spec;
    }
    spec.ignore_paths = options.ignore_fields;
    spec.ignore_paths.insert(spec.ignore_paths.end(), options.key_fields.begin(),
                             options.key_fields.end());
    if (options.time_field) spec.ignore_paths.push_back(*options.time_field);
    if (options.source_field) spec.ignore_paths.push_back(*options.source_field);
    if (options.status_field) spec.ignore_paths.push_back(*options.status_field);
    // Where a copy went and which attempt it was differ between copies of
    // one event by design.
    if (options.route_field) spec.ignore_paths.push_back(*options.route_field);
    spec.ignore_paths.insert(spec.ignore_paths.end(), options.attempt_fields.begin(),
                             options.attempt_fields.end());
    // Fields that differ between deliveries of one request, whatever was
    // sent: counted as payload, every retried group would read as key-reuse
    // (docs/audit.md lists them; --payload chooses exactly what counts).
    for (const char* name : record::k_volatile_fields)
        spec.ignore_paths.push_back(record::FieldPath::parse(name));
    spec.ignore_paths.insert(spec.ignore_paths.end(), options.volatile_fields.begin(),
                             options.volatile_fields.end());
    spec.ignore_paths.insert(spec.ignore_paths.end(), row_identity.begin(), row_identity.end());
    return spec;
}

std::vector<record::FieldPath> row_identity_of(const AuditRunOptions& options) {
    std::vector<record::FieldPath> paths;
    if (!options.sqlite_path.empty())
        for (const auto& column :
             run::sqlite_primary_key_columns(options.sqlite_path, options.sqlite_query))
            paths.push_back(record::FieldPath::of_segments({column}));
    return paths;
}

std::map<std::string, nlohmann::json> read_payloads_again(const AuditRunOptions& options,
                                                          const std::set<std::string>& positions,
                                                          std::string& unread) {
    std::map<std::string, nlohmann::json> payloads;
    visit_payloads_again(options, positions, unread,
                         [&](const std::string& position, const nlohmann::json& payload) {
                             payloads.emplace(position, payload);
                         });
    return payloads;
}

namespace {

// The records at `positions` read again, each parsed into `parser` and
// handed to `visit` with the payload's spec, which leaves out
// `also_ignored` too.
using ParsedVisit =
    std::function<void(const std::string& position, record::RecordParser& parser,
                       const record::KeySpec& spec, const record::IgnoredPaths& ignored)>;

void read_again(const AuditRunOptions& options, const std::set<std::string>& positions,
                const std::vector<record::FieldPath>& also_ignored, std::string& unread,
                const ParsedVisit& visit) {
    if (positions.empty()) return;
    auto file_of = [](const std::string& position) {
        auto colon = position.rfind(':');
        return position.substr(0, colon);
    };
    std::set<std::string> files;
    for (const auto& position : positions)
        files.insert(file_of(position));
    record::RecordParser parser;
    std::string at;
    auto take = [&](const record::KeySpec& spec, const record::IgnoredPaths& ignored,
                    std::string_view line, std::string position) {
        if (!positions.count(position)) return;
        if (parser.parse(line)) return;
        visit(position, parser, spec, ignored);
    };
    auto with_also_ignored = [&](record::KeySpec spec) {
        spec.ignore_paths.insert(spec.ignore_paths.end(), also_ignored.begin(), also_ignored.end());
        return spec;
    };

    if (options.read_records) {
        auto spec = with_also_ignored(payload_spec(options));
        record::IgnoredPaths ignored(spec.ignore_paths);
        run::InputOptions input = options.input;
        input.paths.clear();
        for (const auto& path :
             options.input.paths.empty() ? std::vector<std::string>{"-"} : options.input.paths) {
            // Records from standard input are named "<stdin>" (record/input.cpp).
            if (!files.count(path == "-" ? "<stdin>" : path)) continue;
            if (path == "-" && options.input.stdin_fd < 0) {
                unread = "standard input cannot be read twice: give the log as a file to see "
                         "which fields differ";
                continue;
            }
            input.paths.push_back(path);
        }
        if (!input.paths.empty()) {
            // The wanted lines of each file, in order: a record is passed
            // over by comparing two numbers (a position string built and
            // looked up per record was most of this pass over a million),
            // and reading stops after the last wanted line.
            struct WantedLines {
                std::vector<std::uint64_t> lines;
                std::size_t next = 0;
            };
            std::map<std::string, WantedLines, std::less<>> by_file;
            std::size_t left = 0;
            for (const auto& position : positions) {
                auto colon = position.rfind(':');
                std::uint64_t line = 0;
                auto digits = std::string_view(position).substr(colon + 1);
                auto [end, error] =
                    std::from_chars(digits.data(), digits.data() + digits.size(), line);
                if (colon == std::string::npos || error != std::errc() ||
                    end != digits.data() + digits.size())
                    continue; // a row's position ("input:row 3"): read below
                by_file[position.substr(0, colon)].lines.push_back(line);
                ++left;
            }
            for (auto& [file, wanted] : by_file)
                std::sort(wanted.lines.begin(), wanted.lines.end());
            run::InputStream stream(input, nullptr);
            const std::string* source = nullptr;
            WantedLines* wanted = nullptr;
            while (left > 0) {
                auto record = stream.next();
                if (!record) break;
                if (record->source != source) {
                    source = record->source;
                    auto found = by_file.find(*source);
                    wanted = found == by_file.end() ? nullptr : &found->second;
                }
                if (!wanted) continue;
                auto& lines = wanted->lines;
                while (wanted->next < lines.size() && lines[wanted->next] < record->line)
                    ++wanted->next;
                if (wanted->next == lines.size() || lines[wanted->next] != record->line) continue;
                ++wanted->next;
                --left;
                if (record->oversized_bytes) continue;
                at.assign(*record->source);
                at += ':';
                at += std::to_string(record->line);
                take(spec, ignored, record->bytes, at);
            }
        }
    }
    auto row_spec = with_also_ignored(payload_spec(options, row_identity_of(options)));
    record::IgnoredPaths row_ignored(row_spec.ignore_paths);
    std::string padded;
    auto take_row = [&](std::string_view json, const run::RowPosition& position) {
        padded.assign(json);
        padded.append(io::k_padding_bytes, ' ');
        at.assign(position.input);
        at += position.row ? ":row " : ":";
        at += std::to_string(position.number);
        take(row_spec, row_ignored, std::string_view(padded).substr(0, json.size()), at);
    };
    for (const auto& path : options.csv_paths)
        if (files.count(path)) run::read_csv_rows(path, take_row);
    if (!options.sqlite_path.empty() && files.count(options.sqlite_path))
        run::read_sqlite_rows(options.sqlite_path, options.sqlite_query, take_row);
}

} // namespace

void visit_payloads_again(
    const AuditRunOptions& options, const std::set<std::string>& positions, std::string& unread,
    const std::function<void(const std::string&, const nlohmann::json&)>& visit) {
    read_again(options, positions, {}, unread,
               [&](const std::string& position, record::RecordParser& parser,
                   const record::KeySpec& spec, const record::IgnoredPaths& ignored) {
                   if (auto payload = payload_of(parser, spec, ignored)) visit(position, *payload);
               });
}

void visit_payload_digests_again(
    const AuditRunOptions& options, const std::set<std::string>& positions,
    const std::vector<record::FieldPath>& also_ignored, std::string& unread,
    const std::function<void(const std::string&, std::uint64_t)>& visit) {
    read_again(options, positions, also_ignored, unread,
               [&](const std::string& position, record::RecordParser& parser,
                   const record::KeySpec&, const record::IgnoredPaths& ignored) {
                   if (auto digest = parser.event_hash(ignored)) visit(position, *digest);
               });
}

// The fields that differ between the payloads of each group that mixes
// them: its first record against the first record of each other payload
// (up to three), read again from the files (docs/audit.md, "What
// differs"). Bounded: the first k_groups_compared such groups.
void compare_payloads(const AuditRunOptions& options, PerDelivery& per_delivery, GroupShelf& groups,
                      PayloadDifferences& differences_found, io::Diagnostics& diagnostics) {
    constexpr std::size_t k_payloads_compared = 3, k_groups_compared = 10'000;
    struct Wanted {
        bool fingerprint_group = false;
        std::string first;
        std::vector<std::string> later;
    };
    std::vector<Wanted> wanted;
    std::set<std::string> positions;
    for (std::size_t g = 0; g < groups.size() && wanted.size() < k_groups_compared; ++g) {
        if (!groups.mixes_payloads(g)) continue;
        auto [findings, group] = groups.at(g);
        Wanted one{
            group.kind == GroupKind::fingerprint, findings.position(group.records.front()), {}};
        std::set<std::uint64_t> seen{findings.attempts[group.records.front()].payload};
        for (auto index : group.records)
            if (one.later.size() < k_payloads_compared &&
                seen.insert(findings.attempts[index].payload).second)
                one.later.push_back(findings.position(index));
        positions.insert(one.first);
        positions.insert(one.later.begin(), one.later.end());
        wanted.push_back(std::move(one));
    }
    if (wanted.empty()) return;
    std::string unread;
    // What learning per-delivery fields read already is not read again.
    std::set<std::string> unread_positions;
    for (const auto& position : positions)
        if (!per_delivery.payloads_read.count(position)) unread_positions.insert(position);
    auto payloads = read_payloads_again(options, unread_positions, unread);
    for (const auto& position : positions)
        if (auto found = per_delivery.payloads_read.find(position);
            found != per_delivery.payloads_read.end())
            payloads.emplace(position, std::move(found->second));
    per_delivery.payloads_read.clear();
    if (!unread.empty())
        diagnostics.warning({}, fmt::format("groups mix payloads, but {}", unread));
    for (const auto& one : wanted) {
        auto first = payloads.find(one.first);
        if (first == payloads.end()) continue;
        auto& comparisons = differences_found.by_group[{one.fingerprint_group, one.first}];
        for (const auto& at : one.later) {
            auto later = payloads.find(at);
            if (later == payloads.end()) continue;
            PayloadComparison comparison{one.first, at, differences(first->second, later->second),
                                         0};
            std::erase_if(comparison.fields, [&](const FieldDifference& difference) {
                return per_delivery.covers(difference.path);
            });
            if (comparison.fields.size() > k_differences_shown) {
                comparison.more = comparison.fields.size() - k_differences_shown;
                comparison.fields.resize(k_differences_shown);
            }
            comparisons.push_back(std::move(comparison));
        }
    }
}

} // namespace idem::audit::detail
