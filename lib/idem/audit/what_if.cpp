#include "idem/audit/what_if.hpp"

#include <algorithm>
#include <cmath>

namespace idem::audit {

WhatIfJudge::WhatIfJudge(WhatIfOptions options) : m_options(std::move(options)) {
    for (auto ttl : m_options.ttls) {
        WhatIf::Setting setting;
        setting.ttl = ttl;
        m_settings.push_back(setting);
    }
}

void WhatIfJudge::add_key_group(std::string_view key, std::vector<Timestamp> times) {
    if (times.size() < 2) return;
    std::sort(times.begin(), times.end());
    for (std::size_t i = 1; i < times.size(); ++i)
        m_delays.push_back((times[i] - times.front()).count());
    // As dedup judges: a copy within the TTL of its key's claim is caught;
    // one after it finds the claim expired, passes, and claims anew.
    for (auto& setting : m_settings) {
        auto claim = times.front();
        for (std::size_t i = 1; i < times.size(); ++i) {
            ++setting.duplicates;
            auto since = times[i] - claim;
            if (since <= setting.ttl) {
                ++setting.caught;
                continue;
            }
            ++setting.missed;
            claim = times[i];
            // The longest-delayed misses: the ones a longer TTL would need.
            auto& examples = setting.examples;
            WhatIf::Missed missed{std::string(key), since};
            if (examples.size() < m_options.examples) {
                examples.push_back(std::move(missed));
            } else {
                auto shortest = std::min_element(
                    examples.begin(), examples.end(),
                    [](const auto& a, const auto& b) { return a.after_claim < b.after_claim; });
                if (shortest->after_claim < since) *shortest = std::move(missed);
            }
        }
    }
}

AlternativeKeyJudge::AlternativeKeyJudge(std::string paths, Duration ttl, std::size_t examples)
    : m_paths(std::move(paths)), m_ttl(ttl), m_examples(examples) {}

void AlternativeKeyJudge::add(std::string_view key, std::optional<Timestamp> time,
                              const FirstOfIntent& record) {
    if (key.empty()) return;
    ++m_records;
    // Found by the view: a string is built only for a key seen the first time.
    auto found = m_groups.find(key);
    if (found == m_groups.end()) {
        found = m_groups.emplace(std::string(key), Group{}).first;
        found->second.first = record;
    } else if (record.intent != found->second.first.intent) {
        auto& others = found->second.others;
        auto other = std::find_if(others.begin(), others.end(), [&](const auto& seen) {
            return seen.first.intent == record.intent;
        });
        if (other == others.end())
            others.emplace_back(record, 1);
        else
            ++other->second;
    }
    auto& group = found->second;
    ++group.copies;
    if (time) group.times.push_back(time->time_since_epoch().count());
}

void AlternativeKeyJudge::for_each_mixed(
    const std::function<void(const std::vector<FirstOfIntent>&)>& visit) const {
    std::vector<FirstOfIntent> firsts;
    for (const auto& [key, group] : m_groups) {
        if (group.others.empty()) continue;
        firsts.assign(1, group.first);
        for (const auto& [first, copies] : group.others)
            firsts.push_back(first);
        visit(firsts);
    }
}

WhatIf::KeySetting
AlternativeKeyJudge::finish(const std::function<std::uint64_t(std::uint64_t)>& same_as) const {
    auto intent_of = [&](std::uint64_t intent) { return same_as ? same_as(intent) : intent; };
    WhatIf::KeySetting setting;
    setting.key = m_paths;
    setting.ttl = m_ttl;
    setting.records = m_records;
    // In key order, so that the examples do not depend on hashing.
    std::vector<const std::pair<const std::string, Group>*> ordered;
    for (const auto& entry : m_groups)
        if (entry.second.copies > 1) ordered.push_back(&entry);
    std::sort(ordered.begin(), ordered.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    for (const auto* entry : ordered) {
        const auto& [key, group] = *entry;
        setting.duplicates += group.copies - 1;
        std::uint64_t unlike = 0; // copies of another intent than the first's
        for (const auto& [first, copies] : group.others)
            if (intent_of(first.intent) != intent_of(group.first.intent)) unlike += copies;
        if (unlike > 0) {
            ++setting.conflicting_groups;
            setting.swallowed += unlike;
            if (setting.conflict_examples.size() < m_examples)
                setting.conflict_examples.push_back(key);
        }
        // Copies without a time cannot be judged against the TTL: caught,
        // as dedup would catch them while the first copy's claim lives.
        auto untimed = group.copies - group.times.size();
        auto times = group.times;
        std::sort(times.begin(), times.end());
        std::uint64_t caught = times.empty() ? (untimed > 0 ? untimed - 1 : 0) : untimed;
        std::uint64_t missed = 0;
        if (!times.empty()) {
            auto claim = times.front();
            for (std::size_t i = 1; i < times.size(); ++i) {
                auto since = Duration(times[i] - claim);
                if (since <= m_ttl) {
                    ++caught;
                    continue;
                }
                ++missed;
                claim = times[i];
                if (setting.examples.size() < m_examples) setting.examples.push_back({key, since});
            }
        }
        setting.caught += caught;
        setting.missed += missed;
    }
    return setting;
}

WhatIf WhatIfJudge::finish(std::optional<Timestamp> first, std::optional<Timestamp> last,
                           std::uint64_t keys) const {
    WhatIf result;
    result.settings = m_settings;
    auto delays = m_delays;
    std::sort(delays.begin(), delays.end());
    result.timed_duplicates = delays.size();
    constexpr std::int64_t k_bounds_us[7] = {1'000'000,      10'000'000,    60'000'000,
                                             600'000'000,    3'600'000'000, 36'000'000'000,
                                             360'000'000'000};
    for (auto delay : delays) {
        std::size_t bucket = 0;
        while (bucket < 7 && delay >= k_bounds_us[bucket])
            ++bucket;
        ++result.delays[bucket];
    }
    // Fingerprints held at once: keys are claimed at the log's rate, and
    // each is held for the TTL (at most every key the log has).
    auto held = [&](Duration ttl) -> std::uint64_t {
        if (!first || !last || *last <= *first) return keys;
        auto span = static_cast<double>((*last - *first).count());
        auto rate = static_cast<double>(keys) / span; // keys per microsecond
        return std::min<std::uint64_t>(
            keys, static_cast<std::uint64_t>(std::ceil(rate * static_cast<double>(ttl.count()))));
    };
    for (auto& setting : result.settings) {
        setting.held = held(setting.ttl);
        std::sort(setting.examples.begin(), setting.examples.end(),
                  [](const auto& a, const auto& b) {
                      return a.after_claim != b.after_claim ? a.after_claim > b.after_claim
                                                            : a.key < b.key;
                  });
    }
    if (m_options.suggest && !delays.empty()) {
        // A TTL at least as long as a duplicate's delay after its key's
        // first copy catches it (a claim renewed by an earlier miss only
        // catches more): the coverage's quantile of the delays.
        for (const auto& covering : covering_durations(delays)) {
            WhatIf::Suggestion suggestion;
            suggestion.coverage = covering.coverage;
            suggestion.ttl = covering.duration;
            suggestion.held = held(suggestion.ttl);
            result.suggestions.push_back(suggestion);
        }
    }
    return result;
}

} // namespace idem::audit
