#include "idem/reconcile/ledger.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fmt/format.h>
#include <iterator>
#include <span>
#include <tuple>

namespace idem::reconcile {

namespace {
constexpr std::string_view k_names[k_finding_kinds] = {"lost", "duplicated", "late", "orphan",
                                                       "changed"};

std::optional<double> percentile(std::span<const std::int64_t> sorted, double fraction) {
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

// One judgement of every key (Ledger::judge): the figures it adds up, and
// what it knows of the key being judged. Each step is one kind of finding.
class Ledger::Judgement {
public:
    Judgement(const Ledger& ledger, std::optional<Timestamp> now)
        : m_ledger(ledger), m_options(ledger.m_options), m_stages(m_options.stages.size()),
          m_have_now(now.has_value()), m_now_us(now ? now->time_since_epoch().count() : 0) {
        m_result.keys = ledger.m_keys.size();
        for (std::size_t s = 0; s < m_stages; ++s) {
            StageFigures figures;
            figures.name = m_options.stages[s];
            figures.records = ledger.m_records[s];
            m_result.stages.push_back(std::move(figures));
        }
        auto hops = m_stages > 0 ? m_stages - 1 : 0;
        for (std::size_t s = 0; s < hops; ++s) {
            Hop hop;
            hop.from = m_options.stages[s];
            hop.to = m_options.stages[s + 1];
            m_result.hops.push_back(std::move(hop));
        }
        m_result.latencies.resize(hops);
        m_hours.resize(hops);
        m_groups.assign(hops, std::vector<GroupCount>(ledger.m_groups.size()));
        m_result.carried_in = ledger.m_carried_in;
    }

    void judge_key(std::uint32_t index) {
        start_key(index);
        judge_repeats();
        judge_orphan();
        for (std::size_t s = 0; s + 1 < m_stages; ++s)
            judge_hop(s);
        if (!m_pending && m_options.report_settled) remember_settled();
        if (m_pending && m_options.carry_pending) carry_pending();
    }

    Reconciliation finish() {
        for (std::size_t s = 0; s + 1 < m_stages; ++s)
            add_up_hop(s);
        return std::move(m_result);
    }

private:
    // --by: per group, keys and lost.
    struct GroupCount {
        std::uint64_t keys = 0, lost = 0;
    };
    static constexpr std::int64_t k_hour_us = 3'600'000'000;

    void start_key(std::uint32_t index) {
        m_index = index;
        m_key = std::string(m_ledger.m_keys.name(index));
        m_reported_before = index < m_ledger.m_reported.size() ? m_ledger.m_reported[index] : 0;
        m_reported_now = 0;
        m_pending = false;
        m_first_stage = m_stages;
        for (std::size_t s = 0; s < m_stages && m_first_stage == m_stages; ++s)
            if (seen(s).count > 0) m_first_stage = s;
        m_group = index < m_ledger.m_group_of.size() ? m_ledger.m_group_of[index] : 0;
        // What earlier runs settled of this key, if they did.
        m_before.reset();
        if (m_options.remembered) {
            m_before = m_options.remembered->find(m_key);
            if (m_before && m_have_now && m_before->settled_us != 0 &&
                m_now_us - m_before->settled_us > m_options.remember.count())
                m_before.reset(); // remembered too long ago: new again
        }
        if (m_before) ++m_result.seen_before;
    }

    [[nodiscard]] const Sighting& seen(std::size_t stage) const {
        return m_ledger.at(m_index, stage);
    }
    [[nodiscard]] bool earlier_at(std::size_t stage) const {
        return m_before && m_before->stages[stage].count > 0;
    }
    [[nodiscard]] std::string processed_on(std::size_t stage) const {
        auto first_us = m_before->stages[stage].first_us;
        return first_us != 0 ? format_rfc3339(Timestamp(Duration(first_us)))
                             : std::string("in an earlier run");
    }

    // The findings on the key being judged: those a previous run reported
    // (carried with it) are not reported again; those of this run are
    // carried on with it if it stays pending.
    bool already(std::uint32_t bit) {
        m_reported_now |= bit;
        return (m_reported_before & bit) != 0;
    }

    void note(Finding finding, std::size_t stage, std::string detail) {
        auto index = static_cast<std::size_t>(finding);
        ++m_result.counts[index];
        // The smallest keys, whatever order the hash table gives: the same
        // examples in every run.
        auto& examples = m_result.examples[index];
        if (examples.size() < m_options.examples) {
            examples.push_back({m_key, m_options.stages[stage], std::move(detail)});
            return;
        }
        auto largest =
            std::max_element(examples.begin(), examples.end(),
                             [](const Example& a, const Example& b) { return a.key < b.key; });
        if (largest != examples.end() && m_key < largest->key)
            *largest = {m_key, m_options.stages[stage], std::move(detail)};
    }

    // duplicated: more copies at a stage than the stage before had (more
    // than one at the first), or a copy of a key an earlier run settled
    // there.
    void judge_repeats() {
        for (std::size_t s = 0; s < m_stages; ++s) {
            const auto& here = seen(s);
            if (here.count == 0) continue;
            auto& figures = m_result.stages[s];
            ++figures.keys;
            if (earlier_at(s) && !already(1U << s)) {
                ++figures.duplicated_keys;
                figures.extra_copies += here.count;
                note(Finding::duplicated, s,
                     fmt::format("{} more cop{} at {}, first processed there {} (an earlier "
                                 "run)",
                                 here.count, here.count == 1 ? "y" : "ies", m_options.stages[s],
                                 processed_on(s)));
            } else if (here.count > 1) {
                // Copies the stage before already had are carried, not
                // made here: a key duplicated at intake is duplicated once,
                // where it began, and its copies are carried downstream.
                std::uint64_t upstream = s > 0 ? seen(s - 1).count : 0;
                std::uint64_t count = here.count;
                auto carried = std::min(count, std::max<std::uint64_t>(upstream, 1)) - 1;
                figures.carried_copies += carried;
                auto made = count - 1 - carried;
                if (made == 0 || already(1U << s)) continue;
                ++figures.duplicated_keys;
                figures.extra_copies += made;
                note(Finding::duplicated, s,
                     upstream > 0
                         ? fmt::format("{} copies at {}, {} at {}", here.count, m_options.stages[s],
                                       upstream, m_options.stages[s - 1])
                         : fmt::format("{} copies at {}", here.count, m_options.stages[s]));
            }
        }
    }

    // orphan: first seen past the first stage, where no earlier run saw it
    // upstream either.
    void judge_orphan() {
        if (m_first_stage == 0 || m_first_stage >= m_stages) return;
        for (std::size_t s = 0; s < m_first_stage; ++s)
            if (earlier_at(s)) return;
        if (already(k_reported_orphan)) return;
        ++m_result.stages[m_first_stage].orphans;
        note(Finding::orphan, m_first_stage,
             fmt::format("first seen at {}, in no earlier stage", m_options.stages[m_first_stage]));
    }

    // From stage `s` to the next: reached, pending, lost, amplified, late,
    // changed.
    void judge_hop(std::size_t s) {
        const auto& here = seen(s);
        const auto& next = seen(s + 1);
        if (here.count == 0) return;
        auto& hop = m_result.hops[s];
        ++hop.keys;
        if (here.timed)
            ++m_hours[s][here.first_us >= 0 ? here.first_us / k_hour_us
                                            : -((-here.first_us - 1) / k_hour_us) - 1];
        if (m_group > 0) ++m_groups[s][m_group - 1].keys;
        if (next.count == 0 && earlier_at(s + 1)) {
            ++hop.reached; // it got there in an earlier run
            return;
        }
        if (next.count == 0) {
            judge_absent(s, here);
            return;
        }
        ++hop.reached;
        if (next.count > here.count) ++hop.amplified;
        if (here.timed && next.timed) {
            auto latency = next.first_us - here.first_us;
            m_result.latencies[s].push_back(latency);
            if (m_options.sla && latency > m_options.sla->count() &&
                !already(1U << (k_reported_late + s))) {
                ++hop.late;
                note(Finding::late, s,
                     fmt::format("{} from {} to {}", format_duration(Duration(latency)),
                                 m_options.stages[s], m_options.stages[s + 1]));
            }
        }
        if (here.payload != 0 && next.payload != 0 && here.payload != next.payload &&
            !already(1U << (k_reported_changed + s))) {
            ++hop.changed;
            note(Finding::changed, s + 1,
                 fmt::format("its payload at {} differs from {}'s", m_options.stages[s + 1],
                             m_options.stages[s]));
        }
    }

    // At stage `s`, never at the next: pending within --grace, else lost.
    void judge_absent(std::size_t s, const Sighting& here) {
        auto& hop = m_result.hops[s];
        bool past_grace =
            !here.timed || !m_have_now || m_now_us - here.last_us >= m_options.grace.count();
        if (!past_grace) {
            ++hop.pending;
            m_pending = true;
            return;
        }
        ++hop.lost;
        if (m_group > 0) ++m_groups[s][m_group - 1].lost;
        if (here.timed) ++hop.lost_by_hour[hour_of(here.first_us)];
        if (!m_result.missing.count(m_key)) m_result.missing.emplace(m_key, m_first_stage);
        note(Finding::lost, s,
             fmt::format("at {}{}, never at {}", m_options.stages[s],
                         here.timed ? " " + format_rfc3339(Timestamp(Duration(here.first_us)))
                                    : std::string(),
                         m_options.stages[s + 1]));
    }

    // A key no hop waits for is remembered (--remember), with its first
    // processing at each stage, this run's or an earlier one's.
    void remember_settled() {
        RememberedKey settled;
        settled.stages.resize(m_stages);
        std::int64_t latest_us = 0;
        for (std::size_t s = 0; s < m_stages; ++s) {
            const auto& here = seen(s);
            auto& stage = settled.stages[s];
            stage.count = here.count;
            stage.first_us = here.count > 0 && here.timed ? here.first_us : 0;
            if (earlier_at(s)) { // the first processing is the one to name
                stage.count += m_before->stages[s].count;
                if (m_before->stages[s].first_us != 0)
                    stage.first_us = m_before->stages[s].first_us;
            }
            if (here.count > 0 && here.timed) latest_us = std::max(latest_us, here.last_us);
        }
        settled.settled_us = latest_us != 0 ? latest_us : (m_have_now ? m_now_us : 0);
        m_result.settled.emplace_back(m_key, encode_remembered(settled), settled.settled_us);
    }

    // A key still pending goes to the next run (T+1) with what was reported.
    void carry_pending() {
        CarriedKey carried;
        carried.key = m_key;
        const auto* first = m_ledger.m_sightings.data() + std::size_t{m_index} * m_ledger.m_stages;
        carried.sightings.assign(first, first + m_ledger.m_stages);
        if (m_group > 0) carried.group = std::string(m_ledger.m_groups.name(m_group - 1));
        carried.reported = m_reported_before | m_reported_now;
        m_result.carry.push_back(std::move(carried));
    }

    // A hop's keys by hour, its latency histogram and its --by groups,
    // counted as numbers per key and named once here (formatting per key
    // would cost).
    void add_up_hop(std::size_t s) {
        constexpr std::int64_t k_bounds_us[7] = {10'000,     100'000,     1'000'000,    10'000'000,
                                                 60'000'000, 600'000'000, 3'600'000'000};
        auto& hop = m_result.hops[s];
        for (const auto& [hour, keys] : m_hours[s])
            hop.keys_by_hour[hour_of(hour * k_hour_us)] += keys;
        for (auto latency : m_result.latencies[s]) {
            std::size_t bucket = 0;
            while (bucket < 7 && latency >= k_bounds_us[bucket])
                ++bucket;
            ++hop.latency_histogram[bucket];
        }
        for (std::uint32_t g = 0; g < m_ledger.m_groups.size(); ++g)
            if (m_groups[s][g].keys > 0)
                hop.by_group.push_back({std::string(m_ledger.m_groups.name(g)), m_groups[s][g].keys,
                                        m_groups[s][g].lost});
    }

    const Ledger& m_ledger;
    const LedgerOptions& m_options;
    std::size_t m_stages;
    bool m_have_now;
    std::int64_t m_now_us;
    Reconciliation m_result;
    std::vector<std::map<std::int64_t, std::uint64_t>> m_hours; // per hop: keys by hour
    std::vector<std::vector<GroupCount>> m_groups;              // per hop, per --by group

    // The key being judged.
    std::uint32_t m_index = 0;
    std::string m_key;
    std::uint32_t m_reported_before = 0, m_reported_now = 0;
    bool m_pending = false;
    std::size_t m_first_stage = 0;
    std::uint32_t m_group = 0; // its --by group's index + 1 (0: none)
    std::optional<RememberedKeys::View> m_before;
};

Reconciliation Ledger::judge(std::optional<Timestamp> now) const {
    Judgement judgement(*this, now);
    for (std::uint32_t index = 0; index < m_keys.size(); ++index)
        judgement.judge_key(index);
    return judgement.finish();
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
        into.carried_copies += from.carried_copies;
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
    // As many keys come again before the next drain: the tables are sized
    // for them at once, not grown from nothing by doubling.
    auto drained = m_keys.size();
    m_keys = KeyIndex();
    m_keys.reserve(drained);
    m_sightings.clear();
    m_groups = KeyIndex();
    m_group_of.clear();
    m_reported.clear();
}

} // namespace idem::reconcile
