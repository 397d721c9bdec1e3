#pragma once
// The state machine `idem states` checks a stream against (docs/states.md):
// states, which are initial and final, and the transitions allowed, each
// optionally labelled with the operation that makes it (the seed's table).

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace idem::states {

struct Transition {
    std::string from, to;
    std::string on; // the operation that makes it; empty: any
};

class Machine {
public:
    std::vector<std::string> states; // in declared order
    std::set<std::string, std::less<>> initial, final;
    std::vector<Transition> transitions;

    [[nodiscard]] bool knows(std::string_view state) const;
    [[nodiscard]] bool is_initial(std::string_view state) const {
        return initial.find(state) != initial.end();
    }
    [[nodiscard]] bool is_final(std::string_view state) const {
        return final.find(state) != final.end();
    }
    // Whether from -> to is allowed for `operation` (empty: none given).
    [[nodiscard]] bool allows(std::string_view from, std::string_view to,
                              std::string_view operation) const;

    // Whether any transition from -> to is declared, for whatever operation.
    [[nodiscard]] bool has_edge(std::string_view from, std::string_view to) const;

    // Indexes transitions for allows(); called by every parser.
    void index();

private:
    std::set<std::string, std::less<>> m_known;
    std::map<std::pair<std::string, std::string>, std::vector<std::string>, std::less<>> m_edges;
};

// A machine file, JSON or YAML:
//   states: [pending, paid, shipped, closed]
//   initial: [pending]
//   final: [closed]
//   transitions:
//     - pending > paid                 # any operation
//     - {from: paid, to: refunded, on: refund}
// Throws UsageError with the file, line and column of what is wrong: an
// unknown key, a transition naming an undeclared state, no initial state.
[[nodiscard]] Machine parse_machine_file(const std::string& path);
[[nodiscard]] Machine parse_machine_text(std::string_view text, const std::string& name);

// The inline form: "pending>paid,pending>cancelled,paid>refunded". States
// are those named; initial ones those no transition enters (or `initial`),
// final ones those none leaves (or `final`). Throws UsageError.
[[nodiscard]] Machine parse_allow(std::string_view spec, const std::vector<std::string>& initial,
                                  const std::vector<std::string>& final);

// What a log showed (`states --learn`): every transition seen with its
// count, as a machine file to review and commit.
// How the checker judged a transition it saw, the one judgement its
// findings come from: the event's first finding when it speaks of the
// transition, else allowed, or not judged when versions went missing just
// before it (the path between is unknown; the gap is the finding).
enum class Verdict : std::uint8_t {
    allowed,
    illegal,
    repeated,
    after_final,
    version_conflict,
    unknown_state,
    after_gap
};
inline constexpr std::size_t k_verdicts = 7;
// "allowed", "illegal", ..., "after-gap": for reports.
[[nodiscard]] std::string_view verdict_name(Verdict verdict);

// A transition's count, by verdict.
struct TransitionCounts {
    std::array<std::uint64_t, k_verdicts> by_verdict{};
    [[nodiscard]] std::uint64_t total() const {
        std::uint64_t sum = 0;
        for (auto count : by_verdict)
            sum += count;
        return sum;
    }
    [[nodiscard]] std::uint64_t operator[](Verdict verdict) const {
        return by_verdict[static_cast<std::size_t>(verdict)];
    }
    bool operator==(const TransitionCounts&) const = default;
    TransitionCounts& operator+=(const TransitionCounts& other) {
        for (std::size_t i = 0; i < k_verdicts; ++i)
            by_verdict[i] += other.by_verdict[i];
        return *this;
    }
};

struct Observed {
    std::map<std::pair<std::string, std::string>, TransitionCounts> transitions;
    // Of those, the ones an event naming its operation made (--event):
    // from, to, operation.
    std::map<std::tuple<std::string, std::string, std::string>, std::uint64_t> operations;
    std::map<std::string, std::uint64_t> first_states; // an entity's first state
    std::map<std::string, std::uint64_t> last_states;  // its last
};
// Every name is a double-quoted YAML scalar with its control, C1, bidi and
// invisible characters escaped, so the file reads back (parse_machine_text,
// and any YAML parser) as the names the log held; names in comments pass
// through terminal_text.
[[nodiscard]] std::string learned_machine_yaml(const Observed& observed);

} // namespace idem::states
