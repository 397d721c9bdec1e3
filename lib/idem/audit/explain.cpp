#include "idem/audit/explain.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace idem::audit {

std::string_view cause_name(Cause cause) {
    switch (cause) {
    case Cause::retry_storm:
        return "retry-storm";
    case Cause::concurrent:
        return "concurrent";
    case Cause::ttl_expired:
        return "ttl-expired";
    case Cause::key_reuse:
        return "key-reuse";
    case Cause::key_regenerated:
        return "key-regenerated";
    case Cause::retried_after_failure:
        return "retried-after-failure";
    case Cause::unexplained:
        return "unexplained";
    }
    return "unexplained";
}

std::optional<Cause> parse_cause(std::string_view name) {
    for (auto cause : k_all_causes)
        if (cause_name(cause) == name) return cause;
    return std::nullopt;
}

bool is_failed_answer(std::uint16_t status) {
    return status == k_no_answer || status == 408 || status == 429 || status >= 500;
}

namespace {

// A sender that tried again after the receiver failed it: each record that
// follows, from the same source, one answered 5xx, 408, 429 or not at all.
// The failed records and the retries are the evidence; the gaps are the
// retries' waits.
void find_retries_after_failure(const Explanation& group, const std::vector<Attempt>& attempts,
                                std::vector<Evidence>& found) {
    Evidence evidence{Cause::retried_after_failure, {}, {}, 0};
    std::map<std::uint32_t, std::size_t> last_of_source;
    std::set<std::size_t> involved;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& attempt = attempts[group.records[i]];
        auto previous = last_of_source.find(attempt.source);
        if (previous != last_of_source.end()) {
            const auto& before = attempts[group.records[previous->second]];
            if (is_failed_answer(before.status)) {
                if (involved.insert(previous->second).second)
                    evidence.records.push_back(previous->second);
                if (involved.insert(i).second) evidence.records.push_back(i);
                if (before.time && attempt.time)
                    evidence.gaps.push_back(*attempt.time - *before.time);
            }
        }
        last_of_source[attempt.source] = i;
    }
    if (evidence.records.empty()) return;
    std::sort(evidence.records.begin(), evidence.records.end());
    found.push_back(std::move(evidence));
}

// Three or more attempts from one source whose gaps grow like a backoff
// schedule: the longest gap of the later half is at least 1.5x the longest
// of the earlier half. Nested retry layers (3 x 2 x 2) interleave short and
// long gaps; their envelope still grows, a steady poll's does not.
void find_retry_storms(const Explanation& group, const std::vector<Attempt>& attempts,
                       std::vector<Evidence>& found) {
    std::map<std::uint32_t, std::vector<std::size_t>> by_source;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& attempt = attempts[group.records[i]];
        if (attempt.time) by_source[attempt.source].push_back(i);
    }
    for (const auto& [source, records] : by_source) {
        if (records.size() < 3) continue;
        std::vector<Duration> gaps;
        for (std::size_t i = 1; i < records.size(); ++i)
            gaps.push_back(*attempts[group.records[records[i]]].time -
                           *attempts[group.records[records[i - 1]]].time);
        auto half = (gaps.size() + 1) / 2;
        auto earlier = *std::max_element(gaps.begin(), gaps.begin() + static_cast<long>(half));
        auto later = *std::max_element(gaps.begin() + static_cast<long>(half), gaps.end());
        if (gaps.size() < 2 || earlier.count() <= 0 || later * 2 < earlier * 3) continue;
        found.push_back({Cause::retry_storm, records, gaps, source});
    }
}

// Records from different sources within the race window of each other.
void find_races(const Explanation& group, const std::vector<Attempt>& attempts,
                Duration race_window, std::vector<Evidence>& found) {
    Evidence evidence{Cause::concurrent, {}, {}, 0};
    std::set<std::size_t> involved;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& left = attempts[group.records[i]];
        if (!left.time) continue;
        for (std::size_t j = i + 1; j < group.records.size(); ++j) {
            const auto& right = attempts[group.records[j]];
            if (!right.time) continue;
            auto apart = *right.time - *left.time;
            if (apart > race_window) break; // records are in time order
            if (left.source == right.source) continue;
            if (involved.insert(i).second) evidence.records.push_back(i);
            if (involved.insert(j).second) evidence.records.push_back(j);
            evidence.gaps.push_back(apart);
        }
    }
    if (!evidence.records.empty()) {
        std::sort(evidence.records.begin(), evidence.records.end());
        found.push_back(std::move(evidence));
    }
}

// Under one key, a repeat more than the TTL after the record before it.
void find_expired(const Explanation& group, const std::vector<Attempt>& attempts, Duration ttl,
                  std::vector<Evidence>& found) {
    Evidence evidence{Cause::ttl_expired, {}, {}, 0};
    std::optional<std::size_t> previous;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        if (!attempts[group.records[i]].time) continue;
        if (previous) {
            auto gap = *attempts[group.records[i]].time - *attempts[group.records[*previous]].time;
            if (gap > ttl) {
                if (evidence.records.empty() || evidence.records.back() != *previous)
                    evidence.records.push_back(*previous);
                evidence.records.push_back(i);
                evidence.gaps.push_back(gap);
            }
        }
        previous = i;
    }
    if (!evidence.records.empty()) found.push_back(std::move(evidence));
}

// The first record of each distinct value of `field`, when there are several.
template <typename Field>
std::vector<std::size_t> first_of_each(const Explanation& group,
                                       const std::vector<Attempt>& attempts, Field field) {
    std::vector<std::size_t> firsts;
    std::set<std::uint64_t> seen;
    for (std::size_t i = 0; i < group.records.size(); ++i)
        if (seen.insert(field(attempts[group.records[i]])).second) firsts.push_back(i);
    return firsts;
}

// One business intent under several keys, within the window of each other.
void find_regenerated(const Explanation& group, const std::vector<Attempt>& attempts,
                      Duration window, std::vector<Evidence>& found) {
    // Records without a key say nothing about keys.
    auto firsts =
        first_of_each(group, attempts, [](const Attempt& attempt) { return attempt.key; });
    std::erase_if(firsts, [&](std::size_t i) { return attempts[group.records[i]].key == 0; });
    if (firsts.size() < 2) return;
    Evidence evidence{Cause::key_regenerated, {}, {}, 0};
    for (std::size_t i = 0; i < firsts.size(); ++i) {
        const auto& attempt = attempts[group.records[firsts[i]]];
        bool near_another = false;
        for (std::size_t j = 0; j < firsts.size() && !near_another; ++j) {
            const auto& other = attempts[group.records[firsts[j]]];
            if (i == j || other.key == attempt.key) continue;
            near_another = !attempt.time || !other.time ||
                           (*attempt.time > *other.time ? *attempt.time - *other.time
                                                        : *other.time - *attempt.time) <= window;
        }
        if (near_another) evidence.records.push_back(firsts[i]);
    }
    for (std::size_t i = 1; i < evidence.records.size(); ++i) {
        const auto& before = attempts[group.records[evidence.records[i - 1]]];
        const auto& after = attempts[group.records[evidence.records[i]]];
        if (before.time && after.time) evidence.gaps.push_back(*after.time - *before.time);
    }
    if (evidence.records.size() >= 2) found.push_back(std::move(evidence));
}

} // namespace

Explanation explain(GroupKind kind, std::vector<std::size_t> members,
                    const std::vector<Attempt>& attempts, const ExplainOptions& options) {
    Explanation group;
    group.kind = kind;
    // Time order; records without a time keep their input order, after.
    std::stable_sort(members.begin(), members.end(), [&](std::size_t left, std::size_t right) {
        const auto& a = attempts[left].time;
        const auto& b = attempts[right].time;
        if (a && b) return *a < *b;
        return a.has_value() && !b.has_value();
    });
    group.records = std::move(members);
    std::optional<Timestamp> previous;
    std::set<std::uint32_t> sources, keys;
    std::set<std::uint64_t> payloads;
    for (auto index : group.records) {
        const auto& attempt = attempts[index];
        if (sources.insert(attempt.source).second) group.sources.push_back(attempt.source);
        payloads.insert(attempt.payload);
        keys.insert(attempt.key);
        if (!attempt.time) continue;
        if (!group.first) group.first = attempt.time;
        group.last = attempt.time;
        if (previous) group.gaps.push_back(*attempt.time - *previous);
        previous = attempt.time;
    }
    group.payloads = payloads.size();
    group.keys = keys.size();

    find_retries_after_failure(group, attempts, group.causes);
    find_retry_storms(group, attempts, group.causes);
    find_races(group, attempts, options.race_window, group.causes);
    if (kind == GroupKind::key) {
        find_expired(group, attempts, options.ttl, group.causes);
        if (group.payloads > 1)
            group.causes.push_back(
                {Cause::key_reuse,
                 first_of_each(group, attempts,
                               [](const Attempt& attempt) { return attempt.payload; }),
                 {},
                 0});
    } else {
        find_regenerated(group, attempts, options.window, group.causes);
    }
    if (group.causes.empty()) {
        Evidence nothing{Cause::unexplained, {}, group.gaps, 0};
        for (std::size_t i = 0; i < group.records.size(); ++i)
            nothing.records.push_back(i);
        group.causes.push_back(std::move(nothing));
    }
    return group;
}

} // namespace idem::audit
