#include "idem/reconcile/ledger.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <iterator>
#include <tuple>

namespace idem::reconcile {

namespace {
constexpr std::string_view k_names[k_finding_kinds] = {"lost", "duplicated", "late", "orphan",
                                                       "changed"};

std::optional<double> percentile(std::vector<std::int64_t>& sorted, double fraction) {
    if (sorted.empty()) return std::nullopt;
    auto rank = static_cast<std::size_t>(
        std::ceil(fraction * static_cast<double>(sorted.size()))); // nearest rank
    rank = std::clamp<std::size_t>(rank, 1, sorted.size());
    return static_cast<double>(sorted[rank - 1]) / 1000.0;
}

std::string hour_of(std::int64_t micros) {
    return format_rfc3339(Timestamp(Duration(micros))).substr(0, 13);
}
} // namespace

std::string_view finding_name(Finding finding) {
    return k_names[static_cast<std::size_t>(finding)];
}

std::optional<Finding> parse_finding(std::string_view name) {
    for (std::size_t i = 0; i < k_finding_kinds; ++i)
        if (k_names[i] == name) return static_cast<Finding>(i);
    return std::nullopt;
}

std::string encode_carried(const CarriedKey& carried) {
    std::string out;
    auto put = [&](auto number) {
        out.append(reinterpret_cast<const char*>(&number), sizeof number);
    };
    put(static_cast<std::uint8_t>(1)); // layout version
    put(static_cast<std::uint8_t>(carried.sightings.size()));
    for (const auto& seen : carried.sightings) {
        put(seen.count);
        put(static_cast<std::uint8_t>(seen.timed));
        put(seen.first_us);
        put(seen.last_us);
        put(seen.payload);
    }
    put(carried.reported);
    put(static_cast<std::uint32_t>(carried.group.size()));
    out += carried.group;
    return out;
}

std::optional<CarriedKey> decode_carried(std::string key, std::string_view bytes,
                                         std::size_t stages) {
    auto take = [&](auto& number) {
        if (bytes.size() < sizeof number) return false;
        std::memcpy(&number, bytes.data(), sizeof number);
        bytes.remove_prefix(sizeof number);
        return true;
    };
    std::uint8_t layout = 0, count = 0;
    if (!take(layout) || layout != 1 || !take(count) || count != stages) return std::nullopt;
    CarriedKey carried;
    carried.key = std::move(key);
    carried.sightings.resize(count);
    for (auto& seen : carried.sightings) {
        std::uint8_t timed = 0;
        if (!take(seen.count) || !take(timed) || !take(seen.first_us) || !take(seen.last_us) ||
            !take(seen.payload))
            return std::nullopt;
        seen.timed = timed != 0;
    }
    std::uint32_t group_size = 0;
    if (!take(carried.reported) || !take(group_size) || bytes.size() != group_size)
        return std::nullopt;
    carried.group = std::string(bytes);
    return carried;
}

std::string encode_remembered(const RememberedKey& remembered) {
    std::string out;
    auto put = [&](auto number) {
        out.append(reinterpret_cast<const char*>(&number), sizeof number);
    };
    put(static_cast<std::uint8_t>(1)); // layout version
    put(static_cast<std::uint8_t>(remembered.stages.size()));
    for (const auto& stage : remembered.stages) {
        put(stage.count);
        put(stage.first_us);
    }
    put(remembered.settled_us);
    put(remembered.run);
    return out;
}

std::optional<RememberedKey> decode_remembered(std::string_view bytes, std::size_t stages) {
    auto take = [&](auto& number) {
        if (bytes.size() < sizeof number) return false;
        std::memcpy(&number, bytes.data(), sizeof number);
        bytes.remove_prefix(sizeof number);
        return true;
    };
    std::uint8_t layout = 0, count = 0;
    if (!take(layout) || layout != 1 || !take(count) || count != stages) return std::nullopt;
    RememberedKey remembered;
    remembered.stages.resize(count);
    for (auto& stage : remembered.stages)
        if (!take(stage.count) || !take(stage.first_us)) return std::nullopt;
    if (!take(remembered.settled_us) || !take(remembered.run) || !bytes.empty())
        return std::nullopt;
    return remembered;
}

void RememberedKeys::add(std::string_view key, const RememberedKey& remembered) {
    auto [index, added] = m_keys.find_or_add(key);
    if (added) {
        m_stage_rows.resize(m_stage_rows.size() + m_stages);
        m_settled_us.push_back(0);
    }
    for (std::size_t s = 0; s < m_stages && s < remembered.stages.size(); ++s)
        m_stage_rows[std::size_t{index} * m_stages + s] = remembered.stages[s];
    m_settled_us[index] = remembered.settled_us;
}

std::optional<RememberedKeys::View> RememberedKeys::find(std::string_view key) const {
    auto index = m_keys.find(key);
    if (!index) return std::nullopt;
    return View{m_stage_rows.data() + std::size_t{*index} * m_stages, m_settled_us[*index]};
}

Ledger::Ledger(LedgerOptions options)
    : m_options(std::move(options)), m_stages(std::max<std::size_t>(m_options.stages.size(), 1)) {}

void Ledger::expect_keys(std::size_t keys) {
    m_keys.reserve(keys);
    m_sightings.reserve(keys * m_stages);
}

void Ledger::see(std::size_t stage, std::string_view key, std::optional<Timestamp> time,
                 std::uint64_t payload, std::string_view group) {
    auto [index, added] = m_keys.find_or_add(key);
    if (added) {
        m_sightings.resize(m_sightings.size() + m_stages);
        if (!m_group_of.empty() || !group.empty()) m_group_of.resize(m_keys.size(), 0);
    }
    if (!group.empty()) {
        if (m_group_of.size() < m_keys.size()) m_group_of.resize(m_keys.size(), 0);
        if (m_group_of[index] == 0) m_group_of[index] = m_groups.find_or_add(group).first + 1;
    }
    auto& seen = m_sightings[index * m_stages + stage];
    if (seen.count == 0) seen.payload = payload;
    ++seen.count;
    if (time) {
        auto us = time->time_since_epoch().count();
        if (!seen.timed) {
            seen.first_us = seen.last_us = us;
            seen.timed = true;
        } else {
            seen.first_us = std::min(seen.first_us, us);
            seen.last_us = std::max(seen.last_us, us);
        }
    }
}

void Ledger::carry_in(const CarriedKey& carried) {
    auto [index, added] = m_keys.find_or_add(carried.key);
    if (added) m_sightings.resize(m_sightings.size() + m_stages);
    for (std::size_t s = 0; s < m_stages && s < carried.sightings.size(); ++s)
        m_sightings[index * m_stages + s] = carried.sightings[s];
    if (!carried.group.empty()) {
        if (m_group_of.size() < m_keys.size()) m_group_of.resize(m_keys.size(), 0);
        m_group_of[index] = m_groups.find_or_add(carried.group).first + 1;
    }
    if (m_reported.size() < m_keys.size()) m_reported.resize(m_keys.size(), 0);
    m_reported[index] = carried.reported;
    ++m_carried_in;
}

Reconciliation Ledger::reconcile(std::optional<Timestamp> now) const {
    auto result = judge(now);
    finish_reconciliation(result, m_options);
    return result;
}

Reconciliation Ledger::judge(std::optional<Timestamp> now) const {
    const auto stages = m_options.stages.size();
    Reconciliation result;
    result.keys = m_keys.size();
    for (std::size_t s = 0; s < stages; ++s) {
        StageFigures figures;
        figures.name = m_options.stages[s];
        figures.records = m_records[s];
        result.stages.push_back(std::move(figures));
    }
    for (std::size_t s = 0; s + 1 < stages; ++s) {
        Hop hop;
        hop.from = m_options.stages[s];
        hop.to = m_options.stages[s + 1];
        result.hops.push_back(std::move(hop));
    }
    auto& latencies = result.latencies;
    latencies.resize(stages > 0 ? stages - 1 : 0);
    // Keys at each hop's first stage by hour of event time, counted as
    // numbers and named once at the end (formatting per key would cost).
    constexpr std::int64_t k_hour_us = 3'600'000'000;
    std::vector<std::map<std::int64_t, std::uint64_t>> hours(latencies.size());
    // --by: per hop, per group, keys and lost.
    std::vector<std::vector<std::pair<std::uint64_t, std::uint64_t>>> groups(
        stages > 0 ? stages - 1 : 0,
        std::vector<std::pair<std::uint64_t, std::uint64_t>>(m_groups.size()));
    result.carried_in = m_carried_in;
    // The findings on the key being judged: those a previous run reported
    // (carried with it) are not reported again; those of this run are
    // carried on with it if it stays pending.
    std::uint32_t reported_before = 0, reported_now = 0;
    auto already = [&](std::uint32_t bit) {
        reported_now |= bit;
        return (reported_before & bit) != 0;
    };
    auto note = [&](Finding finding, const std::string& key, std::size_t stage,
                    std::string detail) {
        auto index = static_cast<std::size_t>(finding);
        ++result.counts[index];
        // The smallest keys, whatever order the hash table gives: the same
        // examples in every run.
        auto& examples = result.examples[index];
        if (examples.size() < m_options.examples) {
            examples.push_back({key, m_options.stages[stage], std::move(detail)});
            return;
        }
        auto largest =
            std::max_element(examples.begin(), examples.end(),
                             [](const Example& a, const Example& b) { return a.key < b.key; });
        if (largest != examples.end() && key < largest->key)
            *largest = {key, m_options.stages[stage], std::move(detail)};
    };
    bool have_now = now.has_value();
    std::int64_t now_us = have_now ? now->time_since_epoch().count() : 0;
    for (std::uint32_t index = 0; index < m_keys.size(); ++index) {
        std::string key(m_keys.name(index));
        reported_before = index < m_reported.size() ? m_reported[index] : 0;
        reported_now = 0;
        bool pending = false;
        std::size_t first_stage = stages;
        // What earlier runs settled of this key, if they did.
        std::optional<RememberedKeys::View> before;
        if (m_options.remembered) {
            before = m_options.remembered->find(key);
            if (before && have_now && before->settled_us != 0 &&
                now_us - before->settled_us > m_options.remember.count())
                before.reset(); // remembered too long ago: new again
        }
        if (before) ++result.seen_before;
        auto earlier_at = [&](std::size_t s) { return before && before->stages[s].count > 0; };
        auto processed_on = [&](std::size_t s) {
            auto first_us = before->stages[s].first_us;
            return first_us != 0 ? format_rfc3339(Timestamp(Duration(first_us)))
                                 : std::string("in an earlier run");
        };
        for (std::size_t s = 0; s < stages; ++s) {
            const auto& seen = at(index, s);
            if (seen.count == 0) continue;
            if (first_stage == stages) first_stage = s;
            auto& figures = result.stages[s];
            ++figures.keys;
            if (earlier_at(s) && !already(1U << s)) {
                // Settled by an earlier run, and here again.
                ++figures.duplicated_keys;
                figures.extra_copies += seen.count;
                note(Finding::duplicated, key, s,
                     fmt::format("{} more cop{} at {}, first processed there {} (an earlier "
                                 "run)",
                                 seen.count, seen.count == 1 ? "y" : "ies", m_options.stages[s],
                                 processed_on(s)));
            } else if (seen.count > 1 && !already(1U << s)) {
                ++figures.duplicated_keys;
                figures.extra_copies += seen.count - 1;
                auto upstream = s > 0 ? at(index, s - 1).count : 0;
                note(Finding::duplicated, key, s,
                     upstream > 0
                         ? fmt::format("{} copies at {}, {} at {}", seen.count, m_options.stages[s],
                                       upstream, m_options.stages[s - 1])
                         : fmt::format("{} copies at {}", seen.count, m_options.stages[s]));
            }
        }
        bool seen_upstream_before = false;
        for (std::size_t s = 0; s < first_stage && s < stages; ++s)
            seen_upstream_before = seen_upstream_before || earlier_at(s);
        if (first_stage > 0 && first_stage < stages && !seen_upstream_before &&
            !already(k_reported_orphan)) {
            ++result.stages[first_stage].orphans;
            note(Finding::orphan, key, first_stage,
                 fmt::format("first seen at {}, in no earlier stage",
                             m_options.stages[first_stage]));
        }
        for (std::size_t s = 0; s + 1 < stages; ++s) {
            const auto& here = at(index, s);
            const auto& next = at(index, s + 1);
            if (here.count == 0) continue;
            auto& hop = result.hops[s];
            ++hop.keys;
            if (here.timed)
                ++hours[s][here.first_us >= 0 ? here.first_us / k_hour_us
                                              : -((-here.first_us - 1) / k_hour_us) - 1];
            auto group = index < m_group_of.size() ? m_group_of[index] : 0;
            if (group > 0) ++groups[s][group - 1].first;
            if (next.count == 0 && earlier_at(s + 1)) {
                ++hop.reached; // it got there in an earlier run
                continue;
            }
            if (next.count == 0) {
                bool past_grace =
                    !here.timed || !have_now || now_us - here.last_us >= m_options.grace.count();
                if (!past_grace) {
                    ++hop.pending;
                    pending = true;
                    continue;
                }
                ++hop.lost;
                if (group > 0) ++groups[s][group - 1].second;
                if (here.timed) ++hop.lost_by_hour[hour_of(here.first_us)];
                if (!result.missing.count(key)) result.missing.emplace(key, first_stage);
                note(Finding::lost, key, s,
                     fmt::format("at {}{}, never at {}", m_options.stages[s],
                                 here.timed
                                     ? " " + format_rfc3339(Timestamp(Duration(here.first_us)))
                                     : std::string(),
                                 m_options.stages[s + 1]));
                continue;
            }
            ++hop.reached;
            if (next.count > here.count) ++hop.amplified;
            if (here.timed && next.timed) {
                auto latency = next.first_us - here.first_us;
                latencies[s].push_back(latency);
                if (m_options.sla && latency > m_options.sla->count() &&
                    !already(1U << (k_reported_late + s))) {
                    ++hop.late;
                    note(Finding::late, key, s,
                         fmt::format("{} from {} to {}", format_duration(Duration(latency)),
                                     m_options.stages[s], m_options.stages[s + 1]));
                }
            }
            if (here.payload != 0 && next.payload != 0 && here.payload != next.payload &&
                !already(1U << (k_reported_changed + s))) {
                ++hop.changed;
                note(Finding::changed, key, s + 1,
                     fmt::format("its payload at {} differs from {}'s", m_options.stages[s + 1],
                                 m_options.stages[s]));
            }
        }
        if (!pending && m_options.report_settled) {
            RememberedKey settled;
            settled.stages.resize(stages);
            std::int64_t latest_us = 0;
            for (std::size_t s = 0; s < stages; ++s) {
                const auto& seen = at(index, s);
                auto& stage = settled.stages[s];
                stage.count = seen.count;
                stage.first_us = seen.count > 0 && seen.timed ? seen.first_us : 0;
                if (earlier_at(s)) { // the first processing is the one to name
                    stage.count += before->stages[s].count;
                    if (before->stages[s].first_us != 0)
                        stage.first_us = before->stages[s].first_us;
                }
                if (seen.count > 0 && seen.timed) latest_us = std::max(latest_us, seen.last_us);
            }
            settled.settled_us = latest_us != 0 ? latest_us : (have_now ? now_us : 0);
            result.settled.emplace_back(key, encode_remembered(settled), settled.settled_us);
        }
        if (pending && m_options.carry_pending) {
            CarriedKey carried;
            carried.key = key;
            const auto* first = m_sightings.data() + std::size_t{index} * m_stages;
            carried.sightings.assign(first, first + m_stages);
            auto group = index < m_group_of.size() ? m_group_of[index] : 0;
            if (group > 0) carried.group = std::string(m_groups.name(group - 1));
            carried.reported = reported_before | reported_now;
            result.carry.push_back(std::move(carried));
        }
    }
    constexpr std::int64_t k_bounds_us[7] = {10'000,     100'000,     1'000'000,    10'000'000,
                                             60'000'000, 600'000'000, 3'600'000'000};
    for (std::size_t s = 0; s + 1 < stages; ++s) {
        auto& hop = result.hops[s];
        for (const auto& [hour, keys] : hours[s])
            hop.keys_by_hour[hour_of(hour * k_hour_us)] += keys;
        for (auto latency : latencies[s]) {
            std::size_t bucket = 0;
            while (bucket < 7 && latency >= k_bounds_us[bucket])
                ++bucket;
            ++hop.latency_histogram[bucket];
        }
        for (std::uint32_t g = 0; g < m_groups.size(); ++g)
            if (groups[s][g].first > 0)
                hop.by_group.push_back(
                    {std::string(m_groups.name(g)), groups[s][g].first, groups[s][g].second});
    }
    return result;
}

void add_reconciliation(Reconciliation& total, Reconciliation&& part) {
    if (total.stages.empty()) {
        total = std::move(part);
        return;
    }
    total.keys += part.keys;
    total.carried_in += part.carried_in;
    total.seen_before += part.seen_before;
    std::move(part.settled.begin(), part.settled.end(), std::back_inserter(total.settled));
    for (std::size_t s = 0; s < total.stages.size() && s < part.stages.size(); ++s) {
        auto& into = total.stages[s];
        const auto& from = part.stages[s];
        into.keys += from.keys;
        into.duplicated_keys += from.duplicated_keys;
        into.extra_copies += from.extra_copies;
        into.orphans += from.orphans;
    }
    for (std::size_t h = 0; h < total.hops.size() && h < part.hops.size(); ++h) {
        auto& into = total.hops[h];
        auto& from = part.hops[h];
        into.keys += from.keys;
        into.reached += from.reached;
        into.lost += from.lost;
        into.pending += from.pending;
        into.late += from.late;
        into.changed += from.changed;
        into.amplified += from.amplified;
        for (std::size_t b = 0; b < into.latency_histogram.size(); ++b)
            into.latency_histogram[b] += from.latency_histogram[b];
        for (const auto& [hour, lost] : from.lost_by_hour)
            into.lost_by_hour[hour] += lost;
        for (const auto& [hour, keys] : from.keys_by_hour)
            into.keys_by_hour[hour] += keys;
        std::map<std::string, Hop::Group> groups;
        for (auto& group : into.by_group)
            groups[group.name] = std::move(group);
        for (auto& group : from.by_group) {
            auto& kept = groups[group.name];
            kept.name = group.name;
            kept.keys += group.keys;
            kept.lost += group.lost;
        }
        into.by_group.clear();
        for (auto& [name, group] : groups)
            into.by_group.push_back(std::move(group));
        if (h < total.latencies.size() && h < part.latencies.size())
            total.latencies[h].insert(total.latencies[h].end(), part.latencies[h].begin(),
                                      part.latencies[h].end());
    }
    for (std::size_t i = 0; i < k_finding_kinds; ++i) {
        total.counts[i] += part.counts[i];
        auto& examples = total.examples[i];
        examples.insert(examples.end(), std::make_move_iterator(part.examples[i].begin()),
                        std::make_move_iterator(part.examples[i].end()));
    }
    for (auto& entry : part.missing)
        total.missing.insert(std::move(entry));
    total.carry.insert(total.carry.end(), std::make_move_iterator(part.carry.begin()),
                       std::make_move_iterator(part.carry.end()));
}

void finish_reconciliation(Reconciliation& result, const LedgerOptions& options,
                           const Quantile& quantile) {
    for (std::size_t s = 0; s < result.hops.size(); ++s) {
        auto& hop = result.hops[s];
        auto judged = hop.reached + hop.lost;
        hop.loss_rate =
            judged == 0 ? 0.0 : static_cast<double>(hop.lost) / static_cast<double>(judged);
        if (quantile) {
            hop.p50_ms = quantile(s, 0.50);
            hop.p95_ms = quantile(s, 0.95);
            hop.p99_ms = quantile(s, 0.99);
        } else if (s < result.latencies.size()) {
            auto& sorted = result.latencies[s];
            std::sort(sorted.begin(), sorted.end());
            hop.p50_ms = percentile(sorted, 0.50);
            hop.p95_ms = percentile(sorted, 0.95);
            hop.p99_ms = percentile(sorted, 0.99);
        }
        auto& by_group = hop.by_group;
        std::sort(by_group.begin(), by_group.end(), [](const auto& a, const auto& b) {
            return std::tie(b.lost, a.name) < std::tie(a.lost, b.name);
        });
        if (by_group.size() > k_groups_shown) {
            Hop::Group others{"(others)", 0, 0};
            for (std::size_t i = k_groups_shown; i < by_group.size(); ++i) {
                others.keys += by_group[i].keys;
                others.lost += by_group[i].lost;
            }
            by_group.resize(k_groups_shown);
            by_group.push_back(std::move(others));
        }
    }
    result.latencies.clear();
    for (auto& figures : result.stages)
        figures.duplicate_ratio = figures.records == 0 ? 0.0
                                                       : static_cast<double>(figures.extra_copies) /
                                                             static_cast<double>(figures.records);
    // Examples in a stable order, whatever the hash table's: the smallest keys.
    for (auto& examples : result.examples) {
        std::sort(examples.begin(), examples.end(),
                  [](const Example& a, const Example& b) { return a.key < b.key; });
        if (examples.size() > options.examples) examples.resize(options.examples);
    }
}

void Ledger::merge_in(const CarriedKey& part) {
    auto [index, added] = m_keys.find_or_add(part.key);
    if (added) m_sightings.resize(m_sightings.size() + m_stages);
    for (std::size_t s = 0; s < m_stages && s < part.sightings.size(); ++s) {
        const auto& from = part.sightings[s];
        if (from.count == 0) continue;
        auto& into = m_sightings[index * m_stages + s];
        if (into.count == 0) {
            into = from; // the earlier part came first: its first copy stays the first
            continue;
        }
        into.count += from.count;
        if (from.timed) {
            into.first_us = into.timed ? std::min(into.first_us, from.first_us) : from.first_us;
            into.last_us = into.timed ? std::max(into.last_us, from.last_us) : from.last_us;
            into.timed = true;
        }
    }
    if (!part.group.empty()) {
        if (m_group_of.size() < m_keys.size()) m_group_of.resize(m_keys.size(), 0);
        if (m_group_of[index] == 0) m_group_of[index] = m_groups.find_or_add(part.group).first + 1;
    }
    if (part.reported != 0) {
        if (m_reported.size() < m_keys.size()) m_reported.resize(m_keys.size(), 0);
        m_reported[index] |= part.reported;
    }
}

void Ledger::drain(const std::function<void(const CarriedKey&)>& take) {
    CarriedKey carried;
    for (std::uint32_t index = 0; index < m_keys.size(); ++index) {
        carried.key.assign(m_keys.name(index));
        const auto* first = m_sightings.data() + std::size_t{index} * m_stages;
        carried.sightings.assign(first, first + m_stages);
        auto group = index < m_group_of.size() ? m_group_of[index] : 0;
        carried.group = group > 0 ? std::string(m_groups.name(group - 1)) : std::string();
        carried.reported = index < m_reported.size() ? m_reported[index] : 0;
        take(carried);
    }
    m_keys = KeyIndex();
    m_sightings.clear();
    m_sightings.shrink_to_fit();
    m_groups = KeyIndex();
    m_group_of.clear();
    m_reported.clear();
}

} // namespace idem::reconcile
