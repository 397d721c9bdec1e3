// Per-delivery fields learned from the log (per_delivery.hpp).

#include "idem/audit/per_delivery.hpp"

#include "idem/audit/detail/payloads.hpp"
#include "idem/audit/differences.hpp"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <unordered_map>

namespace idem::audit {

namespace {

std::string position_text(const std::vector<std::string>& inputs,
                          const Findings::Position& position) {
    std::string text;
    append_position(text, inputs, position);
    return text;
}

// Whether `path` is `field` or lies under it ("meta" holds "meta.worker"
// and "meta[0]").
bool is_or_under(std::string_view path, std::string_view field) {
    if (path.size() < field.size() || path.substr(0, field.size()) != field) return false;
    return path.size() == field.size() || path[field.size()] == '.' || path[field.size()] == '[';
}

// A path as differences() writes it ("meta.host", "items[2].qty") as a
// field path of those segments ("/meta/host", "/items/2/qty").
record::FieldPath field_path_of(std::string_view path) {
    std::vector<std::string> segments;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= path.size(); ++i) {
        if (i < path.size() && path[i] != '.' && path[i] != '[') continue;
        if (i > start) segments.emplace_back(path.substr(start, i - start));
        if (i < path.size() && path[i] == '[') {
            auto close = path.find(']', i);
            if (close == std::string_view::npos) break;
            segments.emplace_back(path.substr(i + 1, close - i - 1));
            i = close;
        }
        start = i + 1;
    }
    return record::FieldPath::of_segments(segments);
}

// A generated identifier, as JSON: a UUID, 16 or more hex digits (a trace
// or request id), or 20 to 64 letters and digits with both in it (a ULID,
// a KSUID, a random token) - and never a business id with a prefix
// ("pi_3Mtw..."), a name or a number.
bool looks_generated(std::string_view json) {
    if (json.size() < 2 || json.front() != '"' || json.back() != '"') return false;
    auto text = json.substr(1, json.size() - 2);
    auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
    if (text.size() == 36) {
        bool uuid = true;
        for (std::size_t i = 0; i < text.size() && uuid; ++i)
            uuid = (i == 8 || i == 13 || i == 18 || i == 23) ? text[i] == '-' : hex(text[i]);
        if (uuid) return true;
    }
    if (text.size() >= 16 && std::all_of(text.begin(), text.end(), hex)) return true;
    if (text.size() < 20 || text.size() > 64) return false;
    bool letters = false, digits = false;
    for (char c : text) {
        auto byte = static_cast<unsigned char>(c);
        if (std::isdigit(byte))
            digits = true;
        else if (std::isalpha(byte))
            letters = true;
        else
            return false;
    }
    return letters && digits;
}

} // namespace

bool PerDelivery::covers(std::string_view path) const {
    return std::any_of(fields.begin(), fields.end(),
                       [&](const std::string& field) { return is_or_under(path, field); });
}

PerDelivery learn_per_delivery(const AuditRunOptions& options, const PayloadSurvey& survey,
                               const std::vector<std::string>& inputs,
                               io::Diagnostics& diagnostics) {
    PerDelivery learned;
    if (!options.payload_fields.empty() || !options.learn_per_delivery || survey.mixed.empty())
        return learned;

    // The earliest groups that mix payloads, of the kind learned from; the
    // retried groups judged are those that start no later than the last.
    std::vector<const PayloadSurvey::Mixed*> sample;
    for (const auto& mixed : survey.mixed)
        if (mixed.learned_from) sample.push_back(&mixed);
    std::sort(sample.begin(), sample.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    auto cutoff = std::numeric_limits<std::uint64_t>::max();
    if (sample.size() > k_groups_learned_from) {
        sample.resize(k_groups_learned_from);
        cutoff = sample.back()->first;
    }
    learned.groups_judged = static_cast<std::uint64_t>(std::count_if(
        survey.retried.begin(), survey.retried.end(), [&](auto first) { return first <= cutoff; }));
    if (sample.empty()) return learned;

    std::set<std::string> positions;
    for (const auto* mixed : sample)
        for (const auto& [payload, position] : mixed->payloads)
            positions.insert(position_text(inputs, position));
    std::string unread;
    auto& payloads = learned.payloads_read;
    payloads = detail::read_payloads_again(options, positions, unread);

    // Fields a group names as its intent are never the delivery's.
    std::vector<std::string> never;
    for (const auto& path : options.fingerprint_fields)
        never.push_back(path.text());
    struct Differing {
        std::uint64_t groups = 0; // the groups it differs in
        bool generated = true;    // every value seen a generated id, none twice
        std::set<std::string> values;
    };
    std::map<std::string, Differing> differing;
    auto saw = [&](Differing& field, const std::optional<std::string>& value) {
        if (!field.generated) return;
        field.generated = value && looks_generated(*value) && field.values.insert(*value).second;
        if (!field.generated) field.values.clear();
    };
    for (const auto* mixed : sample) {
        auto first = payloads.find(position_text(inputs, mixed->payloads.front().second));
        if (first == payloads.end()) continue;
        std::set<std::string> fields;
        for (std::size_t p = 1; p < mixed->payloads.size(); ++p) {
            auto later = payloads.find(position_text(inputs, mixed->payloads[p].second));
            if (later == payloads.end()) continue;
            for (auto& difference : differences(first->second, later->second)) {
                auto& field = differing[difference.path];
                if (p == 1) saw(field, difference.before);
                saw(field, difference.after);
                fields.insert(std::move(difference.path));
            }
        }
        for (const auto& field : fields)
            ++differing[field].groups;
    }
    for (const auto& entry : differing) {
        const auto& field = entry.first;
        const auto& found = entry.second;
        // Most retried groups, and enough of them to tell; or, in a log of
        // fewer, a field whose every value is a fresh generated id.
        if (2 * found.groups <= learned.groups_judged) continue;
        if (found.groups < k_fewest_groups && !found.generated) continue;
        if (field == "(the payload)") continue;
        if (std::any_of(never.begin(), never.end(), [&](const std::string& path) {
                return is_or_under(field, path) || is_or_under(path, field);
            }))
            continue;
        learned.fields.push_back(field);
    }
    if (learned.fields.empty()) return learned;
    payloads.clear(); // groups that mixed only learned fields mix nothing now

    // Every payload of a group that mixes them, as read with the fields
    // left out (the digest reading computes, so a payload is compared to
    // another the same way however it was reached).
    std::vector<record::FieldPath> learned_paths;
    for (const auto& field : learned.fields)
        learned_paths.push_back(field_path_of(field));
    std::unordered_map<std::string, std::uint64_t> wanted; // position, payload as read
    std::set<std::string> at;
    for (const auto& mixed : survey.mixed)
        for (const auto& [payload, position] : mixed.payloads)
            if (auto text = position_text(inputs, position); wanted.emplace(text, payload).second)
                at.insert(std::move(text));
    detail::visit_payload_digests_again(
        options, at, learned_paths, unread, [&](const std::string& position, std::uint64_t digest) {
            if (auto found = wanted.find(position); found != wanted.end() && digest != 0)
                learned.classes.emplace(found->second, digest);
        });
    if (!unread.empty())
        diagnostics.warning({}, fmt::format("per-delivery fields are learned without some "
                                            "groups: {}",
                                            unread));
    return learned;
}

} // namespace idem::audit
