#include "idem/states/checker.hpp"

#include "idem/util/text.hpp"

#include <algorithm>
#include <fmt/format.h>
#include <tuple>

namespace idem::states {

namespace {
constexpr std::string_view k_names[k_finding_kinds] = {
    "illegal",     "repeated", "unknown-state", "bad-start",  "version-conflict",
    "version-gap", "stale",    "stuck",         "after-final"};

std::string with_operation(std::string_view operation) {
    return operation.empty() ? std::string() : fmt::format(" (operation {})", quote(operation));
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

Checker::Checker(const Machine& machine, bool track_changes)
    : m_machine(machine), m_track_changes(track_changes) {
    m_names.emplace_back();
    m_name_ids.emplace("", 0);
    for (const auto& state : machine.states)
        intern(state);
}

std::uint32_t Checker::intern(std::string_view name) {
    auto found = m_name_ids.find(name);
    if (found != m_name_ids.end()) return found->second;
    auto id = static_cast<std::uint32_t>(m_names.size());
    m_names.emplace_back(name);
    m_name_ids.emplace(std::string(name), id);
    return id;
}

Checker::Entity& Checker::entity(std::string_view name, bool& created) {
    auto found = m_entities.find(name);
    created = found == m_entities.end();
    if (created) found = m_entities.emplace(std::string(name), Entity{}).first;
    return found->second;
}

void Checker::add(Judgement& judgement, Finding finding, std::string detail) {
    if (judgement.findings.empty()) judgement.detail = std::move(detail);
    judgement.findings.push_back(finding);
    count(finding);
}

void Checker::changed(std::string_view entity) {
    if (m_track_changes) m_changed.emplace_back(entity);
}

Judgement Checker::judge(const Event& event) {
    Judgement judgement;
    bool created = false;
    auto& state = entity(event.entity, created);
    auto to = intern(event.state);
    if (m_first_states.size() < m_names.size()) {
        m_first_states.resize(m_names.size());
        m_last_states.resize(m_names.size());
    }
    const auto& from_name = m_names[state.state];
    if (!m_machine.knows(event.state))
        add(judgement, Finding::unknown_state,
            fmt::format("state {} is not in the machine", quote(event.state)));
    if (state.events == 0) {
        ++m_first_states[to];
        if (judgement.findings.empty() && !m_machine.is_initial(event.state))
            add(judgement, Finding::bad_start,
                fmt::format("the first event of {} is {}, not an initial state",
                            quote(event.entity), quote(event.state)));
    } else {
        judgement.from = from_name;
        ++m_transitions[(static_cast<std::uint64_t>(state.state) << 32) | to];
        bool after_final = m_machine.is_final(from_name);
        if (after_final)
            add(judgement, Finding::after_final,
                fmt::format("{} came after the final state {}", quote(event.state),
                            quote(from_name)));
        if (state.versioned && event.version && *event.version == state.version) {
            if (to == state.state)
                add(judgement, Finding::repeated,
                    fmt::format("version {} with state {} again", *event.version,
                                quote(event.state)));
            else
                add(judgement, Finding::version_conflict,
                    fmt::format("version {} was {}, and now {}: a lost update", *event.version,
                                quote(from_name), quote(event.state)));
        } else if (state.after_gap) {
            // Versions went missing just before: the transitions they made
            // are unknown, so this one is not judged (the gap was reported).
        } else if (!after_final && to == state.state) {
            // The seed's "a repeated 'start processing' on a ticket already
            // processing": allowed only where the machine says so.
            if (!m_machine.allows(from_name, event.state, event.operation))
                add(judgement, Finding::repeated,
                    fmt::format("{} again{}", quote(event.state), with_operation(event.operation)));
        } else if (!after_final && m_machine.knows(event.state) &&
                   !m_machine.allows(from_name, event.state, event.operation)) {
            add(judgement, Finding::illegal,
                fmt::format("{} -> {}{} is not allowed", from_name, event.state,
                            with_operation(event.operation)));
        }
    }
    // After a final state the entity stays there: what follows is judged
    // as after-final, not as a life that went on.
    bool stays = state.events > 0 && m_machine.is_final(m_names[state.state]);
    if (!stays) {
        if (state.events > 0 && m_last_states[state.state] > 0) --m_last_states[state.state];
        ++m_last_states[to];
        state.state = to;
    }
    state.operation = event.operation.empty() ? 0 : intern(event.operation);
    if (event.version && (!state.versioned || *event.version > state.version)) {
        state.version = *event.version;
        state.versioned = true;
    }
    state.last_at = std::max(state.last_at, event.time);
    state.after_gap = false;
    ++state.events;
    state.findings += static_cast<std::uint32_t>(judgement.findings.size());
    changed(event.entity);
    return judgement;
}

Judgement Checker::judge_out_of_order(const Event& event) {
    Judgement judgement;
    bool created = false;
    auto& state = entity(event.entity, created);
    if (state.events > 0) judgement.from = m_names[state.state];
    if (state.versioned && event.version && *event.version == state.version) {
        if (event.state == m_names[state.state])
            add(judgement, Finding::repeated,
                fmt::format("version {} with state {} again", *event.version, quote(event.state)));
        else
            add(judgement, Finding::version_conflict,
                fmt::format("version {} was {}, and now {}: a lost update", *event.version,
                            quote(m_names[state.state]), quote(event.state)));
    } else {
        add(judgement, Finding::stale,
            event.version && state.versioned
                ? fmt::format("version {} came after version {} was applied", *event.version,
                              state.version)
                : std::string("older than what was already applied"));
    }
    state.findings += static_cast<std::uint32_t>(judgement.findings.size());
    changed(event.entity);
    return judgement;
}

Judgement Checker::judge_duplicate(const Event& event, std::string_view held_state) {
    Judgement judgement;
    bool created = false;
    auto& state = entity(event.entity, created);
    if (state.events > 0) judgement.from = m_names[state.state];
    auto claimed =
        event.version ? fmt::format("version {}", *event.version) : std::string("the same time");
    if (event.state == held_state)
        add(judgement, Finding::repeated,
            fmt::format("{} with state {} again", claimed, quote(event.state)));
    else
        add(judgement, Finding::version_conflict,
            fmt::format("{} is claimed by {} and by {}: a lost update", claimed, quote(held_state),
                        quote(event.state)));
    state.findings += 1;
    changed(event.entity);
    return judgement;
}

Judgement Checker::gap(std::string_view entity_name, std::int64_t from, std::int64_t to) {
    Judgement judgement;
    bool created = false;
    auto& state = entity(entity_name, created);
    if (state.events > 0) judgement.from = m_names[state.state];
    add(judgement, Finding::version_gap,
        from == to ? fmt::format("version {} never came", from)
                   : fmt::format("versions {} to {} never came", from, to));
    state.findings += 1;
    state.after_gap = state.events > 0;
    changed(entity_name);
    return judgement;
}

std::vector<Checker::Stuck> Checker::stuck(Timestamp now, Duration stuck_after) const {
    std::vector<Stuck> found;
    for (const auto& [name, state] : m_entities) {
        const auto& state_name = m_names[state.state];
        if (state.events > 0 && !m_machine.is_final(state_name) &&
            now - state.last_at >= stuck_after)
            found.push_back({name, state_name, state.last_at});
    }
    std::sort(found.begin(), found.end(), [](const Stuck& a, const Stuck& b) {
        return std::tie(a.since, a.entity) < std::tie(b.since, b.entity);
    });
    return found;
}

void Checker::restore(std::string name, const EntityState& state) {
    Entity entity;
    entity.state = intern(state.state);
    entity.operation = state.operation.empty() ? 0 : intern(state.operation);
    entity.versioned = state.version.has_value();
    entity.version = state.version.value_or(0);
    entity.last_at = state.last_at;
    entity.events = state.events;
    entity.findings = state.findings;
    m_entities.insert_or_assign(std::move(name), entity);
}

EntityState Checker::named(const Entity& entity) const {
    EntityState state;
    state.state = m_names[entity.state];
    state.operation = m_names[entity.operation];
    if (entity.versioned) state.version = entity.version;
    state.last_at = entity.last_at;
    state.events = entity.events;
    state.findings = entity.findings;
    return state;
}

std::optional<EntityState> Checker::find(std::string_view name) const {
    auto found = m_entities.find(name);
    if (found == m_entities.end()) return std::nullopt;
    return named(found->second);
}

std::vector<std::pair<std::string, EntityState>> Checker::take_changed() {
    std::sort(m_changed.begin(), m_changed.end());
    m_changed.erase(std::unique(m_changed.begin(), m_changed.end()), m_changed.end());
    std::vector<std::pair<std::string, EntityState>> result;
    result.reserve(m_changed.size());
    for (auto& name : m_changed) {
        auto found = m_entities.find(name);
        if (found != m_entities.end()) result.emplace_back(std::move(name), named(found->second));
    }
    m_changed.clear();
    return result;
}

Observed Checker::observed() const {
    Observed observed;
    for (const auto& [edge, count] : m_transitions)
        observed.transitions[{m_names[edge >> 32], m_names[edge & 0xffffffffU]}] += count;
    for (std::size_t i = 0; i < m_first_states.size(); ++i) {
        if (m_first_states[i] > 0) observed.first_states[m_names[i]] = m_first_states[i];
        if (m_last_states[i] > 0) observed.last_states[m_names[i]] = m_last_states[i];
    }
    return observed;
}

} // namespace idem::states
