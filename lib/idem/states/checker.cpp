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
    intern("");
    for (const auto& state : machine.states) {
        auto id = intern(state);
        if (m_declared.find_or_add(state).second) m_declared_ids.push_back(id);
    }
    m_dense = static_cast<std::uint32_t>(m_names.size());
    m_dense_allowed.assign(std::size_t{m_dense} * m_dense, 0);
    m_dense_transitions.assign(std::size_t{m_dense} * m_dense, TransitionCounts{});
}

std::uint32_t Checker::intern(std::string_view name) {
    auto [id, added] = m_name_ids.find_or_add(name);
    if (added) {
        m_names.emplace_back(m_name_texts.emplace_back(name));
        m_facts.push_back(
            {m_machine.knows(name), m_machine.is_initial(name), m_machine.is_final(name)});
    }
    return id;
}

Checker::Allowed Checker::allowed_edge(std::uint32_t from, std::uint32_t to) {
    auto ask_machine = [&] {
        const auto& from_name = m_names[from];
        const auto& to_name = m_names[to];
        // An edge with an unlabelled transition allows any operation.
        return !m_machine.has_edge(from_name, to_name)    ? Allowed::never
               : m_machine.allows(from_name, to_name, {}) ? Allowed::always
                                                          : Allowed::by_operation;
    };
    if (from < m_dense && to < m_dense) {
        auto& cell = m_dense_allowed[std::size_t{from} * m_dense + to];
        if (cell == 0) cell = static_cast<std::uint8_t>(ask_machine()) + 1;
        return static_cast<Allowed>(cell - 1);
    }
    auto edge = (static_cast<std::uint64_t>(from) << 32) | to;
    auto found = m_allowed.find(edge);
    if (found == m_allowed.end()) found = m_allowed.emplace(edge, ask_machine()).first;
    return found->second;
}

void Checker::count_transition(std::uint32_t from, std::uint32_t to, Verdict verdict) {
    auto& counts = from < m_dense && to < m_dense
                       ? m_dense_transitions[std::size_t{from} * m_dense + to]
                       : m_transitions[(static_cast<std::uint64_t>(from) << 32) | to];
    ++counts.by_verdict[static_cast<std::size_t>(verdict)];
}

namespace {

// The verdict on a transition, from its event's judgement: its first
// finding (each speaks of the transition), else allowed, or not judged.
Verdict verdict_of(const Judgement& judgement, bool judged) {
    if (judgement.findings.empty()) return judged ? Verdict::allowed : Verdict::after_gap;
    switch (judgement.findings.front()) {
    case Finding::illegal:
        return Verdict::illegal;
    case Finding::repeated:
        return Verdict::repeated;
    case Finding::after_final:
        return Verdict::after_final;
    case Finding::version_conflict:
        return Verdict::version_conflict;
    case Finding::unknown_state:
        return Verdict::unknown_state;
    default:
        return judged ? Verdict::allowed : Verdict::after_gap;
    }
}

} // namespace

void Checker::count_operation(std::uint32_t from, std::uint32_t to, std::string_view operation) {
    auto edge = (static_cast<std::uint64_t>(from) << 32) | to;
    auto [id, added] = m_operation_ids.find_or_add(operation);
    if (added) m_operation_names.emplace_back(operation);
    ++m_labelled_transitions[{edge, id}];
}

bool Checker::allows(std::uint32_t from, std::uint32_t to, std::string_view operation) {
    switch (allowed_edge(from, to)) {
    case Allowed::always:
        return true;
    case Allowed::never:
        return false;
    case Allowed::by_operation:
        break;
    }
    return m_machine.allows(m_names[from], m_names[to], operation);
}

Checker::Entity& Checker::entity(const Event& event, std::uint32_t& id) {
    auto hash = event.entity_hash != 0 ? event.entity_hash : KeyIndex::hash_of(event.entity);
    auto [index, added] = m_entity_ids.find_or_add(event.entity, hash);
    if (added) m_entities.emplace_back();
    id = index;
    return m_entities[index];
}

void Checker::add(Judgement& judgement, Finding finding, std::string detail) {
    if (judgement.findings.empty()) judgement.detail = std::move(detail);
    judgement.findings.push_back(finding);
    count(finding);
}

void Checker::changed(std::uint32_t id) {
    if (!m_track_changes || m_entities[id].unsaved) return;
    m_entities[id].unsaved = true;
    m_changed.push_back(id);
}

Judgement Checker::judge(const Event& event) {
    std::uint32_t id = 0;
    entity(event, id);
    return judge(event, id);
}

Judgement Checker::judge(const Event& event, std::uint32_t id) {
    Judgement judgement;
    auto& state = m_entities[id];
    auto to = event.state_id != 0 ? event.state_id : intern(event.state);
    if (m_first_states.size() < m_names.size()) {
        m_first_states.resize(m_names.size());
        m_last_states.resize(m_names.size());
    }
    const auto& from_name = m_names[state.state];
    const auto& to_facts = m_facts[to];
    if (!to_facts.known)
        add(judgement, Finding::unknown_state,
            fmt::format("state {} is not in the machine", quote(event.state)));
    if (state.events == 0) {
        ++m_first_states[to];
        if (judgement.findings.empty() && !to_facts.initial)
            add(judgement, Finding::bad_start,
                fmt::format("the first event of {} is {}, not an initial state",
                            quote(event.entity), quote(event.state)));
    } else {
        judgement.from = from_name;
        if (!event.operation.empty()) count_operation(state.state, to, event.operation);
        bool after_final = m_facts[state.state].final;
        bool judged = true;
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
            judged = false;
        } else if (!after_final && to == state.state) {
            // The seed's "a repeated 'start processing' on a ticket already
            // processing": allowed only where the machine says so.
            if (!allows(state.state, to, event.operation))
                add(judgement, Finding::repeated,
                    fmt::format("{} again{}", quote(event.state), with_operation(event.operation)));
        } else if (!after_final && to_facts.known && !allows(state.state, to, event.operation)) {
            add(judgement, Finding::illegal,
                fmt::format("{} -> {}{} is not allowed", from_name, event.state,
                            with_operation(event.operation)));
        }
        // The matrix counts what the findings say: one judgement.
        count_transition(state.state, to, verdict_of(judgement, judged));
    }
    // After a final state the entity stays there: what follows is judged
    // as after-final, not as a life that went on.
    bool stays = state.events > 0 && m_facts[state.state].final;
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
    changed(id);
    return judgement;
}

Judgement Checker::judge_out_of_order(const Event& event) {
    Judgement judgement;
    std::uint32_t id = 0;
    auto& state = entity(event, id);
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
    changed(id);
    return judgement;
}

Judgement Checker::judge_duplicate(const Event& event, std::string_view held_state) {
    Judgement judgement;
    std::uint32_t id = 0;
    auto& state = entity(event, id);
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
    changed(id);
    return judgement;
}

Judgement Checker::gap(std::string_view entity_name, std::int64_t from, std::int64_t to) {
    Judgement judgement;
    std::uint32_t id = 0;
    Event event;
    event.entity = entity_name;
    auto& state = entity(event, id);
    if (state.events > 0) judgement.from = m_names[state.state];
    add(judgement, Finding::version_gap,
        from == to ? fmt::format("version {} never came", from)
                   : fmt::format("versions {} to {} never came", from, to));
    state.findings += 1;
    state.after_gap = state.events > 0;
    changed(id);
    return judgement;
}

std::vector<Checker::Stuck> Checker::stuck(Timestamp now, Duration stuck_after) const {
    std::vector<Stuck> found;
    for (std::uint32_t id = 0; id < m_entities.size(); ++id) {
        const auto& state = m_entities[id];
        if (state.events > 0 && !m_facts[state.state].final && now - state.last_at >= stuck_after)
            found.push_back({std::string(m_entity_ids.name(id)), std::string(m_names[state.state]),
                             state.last_at});
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
    auto [id, added] = m_entity_ids.find_or_add(name);
    if (added) m_entities.emplace_back();
    entity.unsaved = m_entities[id].unsaved;
    m_entities[id] = entity;
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
    auto id = m_entity_ids.find(name);
    if (!id) return std::nullopt;
    return named(m_entities[*id]);
}

std::vector<std::pair<std::string, EntityState>> Checker::take_changed() {
    std::vector<std::pair<std::string, EntityState>> result;
    result.reserve(m_changed.size());
    for (auto id : m_changed) {
        m_entities[id].unsaved = false;
        result.emplace_back(std::string(m_entity_ids.name(id)), named(m_entities[id]));
    }
    m_changed.clear();
    // In name order: what is saved does not depend on arrival.
    std::sort(result.begin(), result.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    return result;
}

Observed Checker::observed() const {
    Observed observed;
    for (std::uint32_t from = 0; from < m_dense; ++from)
        for (std::uint32_t to = 0; to < m_dense; ++to)
            if (const auto& counts = m_dense_transitions[std::size_t{from} * m_dense + to];
                counts.total() > 0)
                observed.transitions[{std::string(m_names[from]), std::string(m_names[to])}] +=
                    counts;
    for (const auto& [edge, count] : m_transitions)
        observed.transitions[{std::string(m_names[edge >> 32]),
                              std::string(m_names[edge & 0xffffffffU])}] += count;
    for (const auto& [labelled, count] : m_labelled_transitions)
        observed.operations[{std::string(m_names[labelled.edge >> 32]),
                             std::string(m_names[labelled.edge & 0xffffffffU]),
                             m_operation_names[labelled.operation]}] += count;
    for (std::size_t i = 0; i < m_first_states.size(); ++i) {
        if (m_first_states[i] > 0)
            observed.first_states[std::string(m_names[i])] = m_first_states[i];
        if (m_last_states[i] > 0) observed.last_states[std::string(m_names[i])] = m_last_states[i];
    }
    return observed;
}

} // namespace idem::states
