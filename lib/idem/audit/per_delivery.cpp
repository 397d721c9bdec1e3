// Per-delivery fields learned from the log (per_delivery.hpp).

#include "idem/audit/per_delivery.hpp"

#include "idem/audit/detail/payloads.hpp"
#include "idem/audit/differences.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace idem::audit {

namespace {

std::string position_text(const std::vector<std::string>& inputs,
                          const Findings::Position& position) {
    std::string text = position.input < inputs.size() ? inputs[position.input] : "<input>";
    text += position.row ? ":row " : ":";
    text += std::to_string(position.number);
    return text;
}

// Whether `path` is `field` or lies under it ("meta" holds "meta.worker"
// and "meta[0]").
bool is_or_under(std::string_view path, std::string_view field) {
    if (path.size() < field.size() || path.substr(0, field.size()) != field) return false;
    return path.size() == field.size() || path[field.size()] == '.' || path[field.size()] == '[';
}

// A path as differences() writes it ("meta.host", "items[2].qty") as a
// field path ("/meta/host", "/items/2/qty"): a JSON Pointer, so that a
// name with '.' in it... is still split where differences() joined it.
record::FieldPath field_path_of(std::string_view path) {
    std::string pointer;
    auto segment = [&](std::string_view name) {
        pointer += '/';
        for (char c : name) {
            if (c == '~')
                pointer += "~0";
            else if (c == '/')
                pointer += "~1";
            else
                pointer += c;
        }
    };
    std::size_t start = 0;
    for (std::size_t i = 0; i <= path.size(); ++i) {
        if (i < path.size() && path[i] != '.' && path[i] != '[') continue;
        if (i > start) segment(path.substr(start, i - start));
        if (i < path.size() && path[i] == '[') {
            auto close = path.find(']', i);
            if (close == std::string_view::npos) break;
            segment(path.substr(i + 1, close - i - 1));
            i = close;
        }
        start = i + 1;
    }
    return record::FieldPath::parse(pointer);
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
    std::map<std::string, std::uint64_t> differing; // groups each field differs in
    for (const auto* mixed : sample) {
        auto first = payloads.find(position_text(inputs, mixed->payloads.front().second));
        if (first == payloads.end()) continue;
        std::set<std::string> fields;
        for (std::size_t p = 1; p < mixed->payloads.size(); ++p) {
            auto later = payloads.find(position_text(inputs, mixed->payloads[p].second));
            if (later == payloads.end()) continue;
            for (auto& difference : differences(first->second, later->second))
                fields.insert(std::move(difference.path));
        }
        for (const auto& field : fields)
            ++differing[field];
    }
    for (const auto& [field, groups] : differing) {
        if (groups < k_fewest_groups || 2 * groups < learned.groups_judged) continue;
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
