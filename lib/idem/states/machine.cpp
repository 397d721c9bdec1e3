#include "idem/states/machine.hpp"

#include "idem/util/detail/yaml_support.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/render.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>

namespace idem::states {

namespace {

using detail::fail_at;
using detail::scalar;

std::vector<std::pair<std::string, YAML::Node>>
names_at(const std::string& file, const YAML::Node& node, std::string_view key) {
    std::vector<std::pair<std::string, YAML::Node>> names;
    if (node.IsSequence()) {
        for (const auto& item : node)
            names.emplace_back(scalar(file, item, key), item);
    } else if (node.IsScalar()) {
        auto text = node.as<std::string>(); // the pieces point into it
        for (auto piece : split(text, ','))
            if (!trim(piece).empty()) names.emplace_back(std::string(trim(piece)), node);
    } else {
        fail_at(file, node, fmt::format("{} is a list of states", key));
    }
    return names;
}

// "pending > paid" or "pending>paid : confirm".
std::optional<Transition> arrow(std::string_view text) {
    auto at = text.find('>');
    if (at == std::string_view::npos) return std::nullopt;
    Transition transition;
    auto to = text.substr(at + 1);
    // "a -> b" as well as "a > b": the dash belongs to the arrow, not the state.
    auto from_end = at;
    if (from_end > 0 && text[from_end - 1] == '-') --from_end;
    auto colon = to.find(':');
    if (colon != std::string_view::npos) {
        transition.on = std::string(trim(to.substr(colon + 1)));
        to = to.substr(0, colon);
    }
    transition.from = std::string(trim(text.substr(0, from_end)));
    transition.to = std::string(trim(to));
    if (transition.from.empty() || transition.to.empty()) return std::nullopt;
    return transition;
}

} // namespace

bool Machine::knows(std::string_view state) const {
    return m_known.find(state) != m_known.end();
}

bool Machine::allows(std::string_view from, std::string_view to, std::string_view operation) const {
    auto found = m_edges.find(std::make_pair(std::string(from), std::string(to)));
    if (found == m_edges.end()) return false;
    for (const auto& on : found->second)
        if (on.empty() || on == operation) return true;
    return false;
}

bool Machine::has_edge(std::string_view from, std::string_view to) const {
    return m_edges.find(std::make_pair(std::string(from), std::string(to))) != m_edges.end();
}

void Machine::index() {
    m_known = {states.begin(), states.end()};
    m_edges.clear();
    for (const auto& transition : transitions)
        m_edges[{transition.from, transition.to}].push_back(transition.on);
}

namespace {

Machine read_machine(std::string_view text, const std::string& name) {
    auto document = detail::load_yaml(text, name);
    if (!document.IsMap())
        fail_at(name, document, "a machine is a map: states:, initial:, final:, transitions:");
    Machine machine;
    std::vector<std::pair<std::string, YAML::Node>> initial, final;
    std::vector<std::pair<Transition, YAML::Node>> transitions;
    bool declared = false;
    for (const auto& item : document) {
        auto key = item.first.as<std::string>();
        const auto& value = item.second;
        if (key == "states") {
            declared = true;
            for (auto& [state, node] : names_at(name, value, key)) {
                if (std::find(machine.states.begin(), machine.states.end(), state) !=
                    machine.states.end())
                    fail_at(name, node, fmt::format("state {} is declared twice", quote(state)));
                machine.states.push_back(state);
            }
        } else if (key == "initial") {
            initial = names_at(name, value, key);
        } else if (key == "final") {
            final = names_at(name, value, key);
        } else if (key == "transitions") {
            if (!value.IsSequence()) fail_at(name, value, "transitions is a list");
            for (const auto& entry : value) {
                if (entry.IsScalar()) {
                    auto parsed = arrow(entry.as<std::string>());
                    if (!parsed)
                        fail_at(name, entry,
                                fmt::format("{} is not FROM > TO (or FROM > TO : OPERATION)",
                                            quote(entry.as<std::string>())));
                    transitions.emplace_back(*parsed, entry);
                } else if (entry.IsMap() && entry.size() == 1 &&
                           entry.begin()->first.as<std::string>().find('>') != std::string::npos) {
                    // "pending > paid : confirm" reads in YAML as a map.
                    auto parsed = arrow(entry.begin()->first.as<std::string>());
                    if (!parsed) fail_at(name, entry, "a transition is FROM > TO : OPERATION");
                    parsed->on = scalar(name, entry.begin()->second, "the operation");
                    transitions.emplace_back(*parsed, entry);
                } else if (entry.IsMap()) {
                    Transition transition;
                    for (const auto& part : entry) {
                        auto field = part.first.as<std::string>();
                        if (field == "from")
                            transition.from = scalar(name, part.second, field);
                        else if (field == "to")
                            transition.to = scalar(name, part.second, field);
                        else if (field == "on" || field == "operation" || field == "op")
                            transition.on = scalar(name, part.second, field);
                        else
                            fail_at(name, part.first,
                                    fmt::format("unknown transition key {} (from, to, on)",
                                                quote(field)));
                    }
                    if (transition.from.empty() || transition.to.empty())
                        fail_at(name, entry, "a transition needs from: and to:");
                    transitions.emplace_back(std::move(transition), entry);
                } else {
                    fail_at(name, entry, "a transition is FROM > TO or {from:, to:, on:}");
                }
            }
        } else {
            fail_at(name, item.first,
                    fmt::format("unknown machine key {} (states, initial, final, transitions)",
                                quote(key)));
        }
    }
    if (!declared) fail_at(name, document, "no states: declare every state the machine has");
    auto check_state = [&](const std::string& state, const YAML::Node& node,
                           std::string_view role) {
        if (std::find(machine.states.begin(), machine.states.end(), state) == machine.states.end())
            fail_at(name, node,
                    fmt::format("{} names state {}, which states: does not declare", role,
                                quote(state)));
    };
    for (auto& [state, node] : initial) {
        check_state(state, node, "initial");
        machine.initial.insert(state);
    }
    for (auto& [state, node] : final) {
        check_state(state, node, "final");
        machine.final.insert(state);
    }
    for (auto& [transition, node] : transitions) {
        check_state(transition.from, node, "a transition");
        check_state(transition.to, node, "a transition");
        machine.transitions.push_back(std::move(transition));
    }
    if (machine.initial.empty())
        fail_at(name, document, "no initial state: say where an entity's life starts (initial:)");
    machine.index();
    return machine;
}

} // namespace

Machine parse_machine_text(std::string_view text, const std::string& name) {
    return detail::interpret_yaml(name, [&] { return read_machine(text, name); });
}

Machine parse_machine_file(const std::string& path) {
    return parse_machine_text(detail::read_config_file(path, "machine"), path);
}

Machine parse_allow(std::string_view spec, const std::vector<std::string>& initial,
                    const std::vector<std::string>& final) {
    Machine machine;
    auto add_state = [&](const std::string& state) {
        if (std::find(machine.states.begin(), machine.states.end(), state) == machine.states.end())
            machine.states.push_back(state);
    };
    for (auto piece : split(spec, ',')) {
        if (trim(piece).empty()) continue;
        auto transition = arrow(piece);
        if (!transition)
            throw UsageError(fmt::format("--allow: {} is not FROM>TO (or FROM>TO:OPERATION)",
                                         quote(trim(piece))));
        add_state(transition->from);
        add_state(transition->to);
        machine.transitions.push_back(std::move(*transition));
    }
    if (machine.transitions.empty()) throw UsageError("--allow: no transition given");
    auto named = [&](const std::vector<std::string>& states, std::string_view flag) {
        std::set<std::string, std::less<>> set;
        for (const auto& state : states) {
            if (std::find(machine.states.begin(), machine.states.end(), state) ==
                machine.states.end())
                throw UsageError(fmt::format("{} {}: no --allow transition names that state", flag,
                                             quote(state)));
            set.insert(state);
        }
        return set;
    };
    machine.initial = named(initial, "--initial");
    machine.final = named(final, "--final");
    if (initial.empty())
        for (const auto& state : machine.states)
            if (std::none_of(machine.transitions.begin(), machine.transitions.end(),
                             [&](const Transition& t) { return t.to == state && t.from != state; }))
                machine.initial.insert(state);
    if (final.empty())
        for (const auto& state : machine.states)
            if (std::none_of(machine.transitions.begin(), machine.transitions.end(),
                             [&](const Transition& t) { return t.from == state && t.to != state; }))
                machine.final.insert(state);
    if (machine.initial.empty())
        throw UsageError("--allow: every state is entered by a transition, so none is where an "
                         "entity starts: give --initial STATE");
    machine.index();
    return machine;
}

std::string_view verdict_name(Verdict verdict) {
    switch (verdict) {
    case Verdict::allowed:
        return "allowed";
    case Verdict::illegal:
        return "illegal";
    case Verdict::repeated:
        return "repeated";
    case Verdict::after_final:
        return "after-final";
    case Verdict::version_conflict:
        return "version-conflict";
    case Verdict::unknown_state:
        return "unknown-state";
    case Verdict::after_gap:
        return "after-gap";
    }
    return "allowed";
}

std::string learned_machine_yaml(const Observed& observed) {
    std::set<std::string> states;
    for (const auto& [edge, count] : observed.transitions) {
        states.insert(edge.first);
        states.insert(edge.second);
    }
    for (const auto& [state, count] : observed.first_states)
        states.insert(state);
    for (const auto& [state, count] : observed.last_states)
        states.insert(state);
    auto list = [](const auto& names) {
        std::string out = "[";
        for (const auto& name : names)
            out += (out.size() > 1 ? ", " : "") + yaml_quoted(name);
        return out + "]";
    };
    std::string out = "# Learned by `idem states --learn`: every transition seen, with how many\n"
                      "# times. Review it (which of these should never happen?) before using it\n"
                      "# as --machine.\n";
    out += "states: " + list(states) + "\n";
    std::vector<std::string> initial;
    std::string first_seen;
    for (const auto& [state, count] : observed.first_states) {
        initial.push_back(state);
        first_seen += fmt::format(" {} {}", terminal_text(state), count);
    }
    out += "initial: " + list(initial) + "  # first states seen:" + first_seen + "\n";
    std::vector<std::string> final;
    for (const auto& [state, count] : observed.last_states) {
        const auto& last = state; // a lambda captures no structured binding in clang 14
        bool leaves = std::any_of(observed.transitions.begin(), observed.transitions.end(),
                                  [&](const auto& edge) {
                                      return edge.first.first == last && edge.first.second != last;
                                  });
        if (!leaves) final.push_back(state);
    }
    out += "final: " + list(final) + "  # last states that no transition left\ntransitions:\n";
    auto times = [](std::uint64_t count) {
        return fmt::format("{} time{}", count, count == 1 ? "" : "s");
    };
    for (const auto& [edge, counts] : observed.transitions) {
        const auto& [from, to] = edge;
        auto count = counts.total();
        // With --event, one transition per operation that made it; events
        // without one need the edge open to any operation.
        std::uint64_t labelled = 0;
        for (auto it = observed.operations.lower_bound({from, to, std::string()});
             it != observed.operations.end() && std::get<0>(it->first) == from &&
             std::get<1>(it->first) == to;
             ++it) {
            out += fmt::format("  - {{from: {}, to: {}, \"on\": {}}}  # {}\n", yaml_quoted(from),
                               yaml_quoted(to), yaml_quoted(std::get<2>(it->first)),
                               times(it->second));
            labelled += it->second;
        }
        if (labelled < count)
            out += fmt::format("  - {{from: {}, to: {}}}  # {}{}\n", yaml_quoted(from),
                               yaml_quoted(to), times(count - labelled),
                               labelled > 0 ? ", with no operation" : "");
    }
    return out;
}

} // namespace idem::states
