// Per-delivery fields learned from the log (per_delivery.hpp).

#include "idem/audit/per_delivery.hpp"

#include "idem/audit/detail/payloads.hpp"
#include "idem/audit/differences.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <xxhash.h>

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

// The payload's leaves outside the learned fields, path and value, in
// path order (nlohmann's objects are ordered): what the payload is
// without them.
void append_leaves(const nlohmann::json& value, std::string& path, const PerDelivery& learned,
                   std::string& out) {
    auto at = path.size();
    if (value.is_object()) {
        for (auto member = value.begin(); member != value.end(); ++member) {
            if (at > 0) path += '.';
            path += member.key();
            if (!learned.covers(path)) append_leaves(member.value(), path, learned, out);
            path.resize(at);
        }
        return;
    }
    if (value.is_array()) {
        for (std::size_t i = 0; i < value.size(); ++i) {
            path += '[';
            path += std::to_string(i);
            path += ']';
            if (!learned.covers(path)) append_leaves(value[i], path, learned, out);
            path.resize(at);
        }
        out += path;
        out += value.empty() ? "\x01[]" : "\x01"; // an empty array, and how many
        out += std::to_string(value.size());
        out += '\0';
        return;
    }
    out += path;
    out += '\x01';
    out += value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    out += '\0';
}

std::uint64_t class_of_payload(const nlohmann::json& payload, const PerDelivery& learned) {
    std::string path, leaves;
    append_leaves(payload, path, learned, leaves);
    auto hash = XXH3_64bits(leaves.data(), leaves.size());
    return hash == 0 ? 1 : hash; // 0 is "no payload"
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
    auto payloads = detail::read_payloads_again(options, positions, unread);

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

    // Every payload of a group that mixes them, without the fields: the
    // sample's from what was read, the rest read once more.
    std::set<std::string> unclassed;
    for (const auto& mixed : survey.mixed)
        for (const auto& [payload, position] : mixed.payloads) {
            if (learned.classes.count(payload)) continue;
            auto at = position_text(inputs, position);
            if (auto found = payloads.find(at); found != payloads.end())
                learned.classes.emplace(payload, class_of_payload(found->second, learned));
            else
                unclassed.insert(std::move(at));
        }
    payloads.clear();
    if (!unclassed.empty()) {
        std::map<std::string, std::uint64_t> wanted; // position, payload as read
        for (const auto& mixed : survey.mixed)
            for (const auto& [payload, position] : mixed.payloads)
                if (!learned.classes.count(payload))
                    wanted.emplace(position_text(inputs, position), payload);
        detail::visit_payloads_again(
            options, unclassed, unread,
            [&](const std::string& position, const nlohmann::json& payload) {
                if (auto found = wanted.find(position); found != wanted.end())
                    learned.classes.emplace(found->second, class_of_payload(payload, learned));
            });
    }
    if (!unread.empty())
        diagnostics.warning({}, fmt::format("per-delivery fields are learned without some "
                                            "groups: {}",
                                            unread));
    return learned;
}

} // namespace idem::audit
