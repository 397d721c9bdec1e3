#pragma once
// The judging of `idem states`, as pure logic (docs/states.md): each
// entity's events, in order, against the machine and their versions. The
// run (run.cpp) orders events with the shared sequencer (order/) and hands
// them here; nothing here reads or writes.

#include "idem/states/machine.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/key_index.hpp"
#include "idem/util/prefetch.hpp"
#include "idem/util/time.hpp"

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace idem::states {

enum class Finding : std::uint8_t {
    illegal,          // a transition the machine does not allow
    repeated,         // the same transition, or the same version and state, again
    unknown_state,    // a state the machine does not declare
    bad_start,        // an entity's first state is not an initial one
    version_conflict, // two events claim one version with different states
    version_gap,      // versions skipped: updates missing from the log
    stale,            // a version lower than one already applied
    stuck,            // not in a final state after --stuck-after
    after_final,      // anything after a final state
};
inline constexpr std::size_t k_finding_kinds = 9;

[[nodiscard]] std::string_view finding_name(Finding finding);
// "illegal", "version-conflict"...; nullopt for a name that is none.
[[nodiscard]] std::optional<Finding> parse_finding(std::string_view name);

// One event of an entity, as the run read it.
struct Event {
    std::string_view entity;
    std::string_view state;
    std::string_view operation; // empty: none (--event not given or absent)
    std::optional<std::int64_t> version;
    Timestamp time;
    std::string_view position; // "file:line"
    // KeyIndex::hash_of(entity), when the caller has it already (0: not yet).
    std::uint64_t entity_hash = 0;
    // Checker::declared_state(state), when the caller has it already (0: not yet).
    std::uint32_t state_id = 0;
};

// What an entity has come to, in names (for the store and reports).
struct EntityState {
    std::string state;
    std::string operation; // of the event that made it
    std::optional<std::int64_t> version;
    Timestamp last_at;
    std::uint64_t events = 0;
    std::uint32_t findings = 0;
};

// The verdict on one event.
struct Judgement {
    // The entity's state before it (a name the checker keeps); none: its first event.
    std::optional<std::string_view> from;
    std::vector<Finding> findings; // empty: fine
    std::string detail;            // why, in words, for the first finding
};

class Checker {
public:
    // `track_changes`: remember which entities changed, for take_changed().
    Checker(const Machine& machine, bool track_changes);

    // An event in its entity's order: judged, and applied.
    Judgement judge(const Event& event);
    // The same, for an entity whose index the caller already has
    // (index_of): one lookup per event instead of two.
    Judgement judge(const Event& event, std::uint32_t id);
    // An event that came out of order beyond what the run could put back:
    // judged against what was applied (stale, repeated, version-conflict),
    // not applied.
    Judgement judge_out_of_order(const Event& event);
    // An event whose version (or stamp) another event of its entity, still
    // waiting to be put in order, already claims with `held_state`.
    Judgement judge_duplicate(const Event& event, std::string_view held_state);
    // Versions `from`..`to` of `entity` never came.
    Judgement gap(std::string_view entity, std::int64_t from, std::int64_t to);

    // Entities not in a final state whose last event is `stuck_after`
    // before `now` (the latest event time): entity, state, since.
    struct Stuck {
        std::string entity, state;
        Timestamp since;
    };
    [[nodiscard]] std::vector<Stuck> stuck(Timestamp now, Duration stuck_after) const;

    // An entity's state from an earlier run (the store).
    void restore(std::string entity, const EntityState& state);
    [[nodiscard]] std::optional<EntityState> find(std::string_view entity) const;
    [[nodiscard]] bool known(std::string_view entity) const {
        return m_entity_ids.find(entity).has_value();
    }
    // The same, with its KeyIndex hash computed ahead.
    [[nodiscard]] bool known(std::string_view entity, std::uint64_t entity_hash) const {
        return m_entity_ids.find(entity, entity_hash).has_value();
    }
    // The entity's index (stable for the run), added unjudged if new.
    std::uint32_t index_of(const Event& event) {
        std::uint32_t id = 0;
        entity(event, id);
        return id;
    }
    // The id of a state the machine declares, for Event::state_id; 0 for
    // any other name. Never changes after construction, so the run's
    // worker threads ask it while the checker judges: one lookup per event
    // less on the thread that judges.
    [[nodiscard]] std::uint32_t declared_state(std::string_view name) const {
        auto found = m_declared.find(name);
        return found ? m_declared_ids[*found] : 0;
    }
    [[nodiscard]] std::string_view entity_name(std::uint32_t id) const {
        return m_entity_ids.name(id);
    }
    // Asks the CPU for an entity judged soon (by its KeyIndex hash).
    void prefetch(std::uint64_t entity_hash) const { m_entity_ids.prefetch(entity_hash); }
    // The second step, a few events later: the entity's index if the
    // index can tell without waiting, its state asked for too.
    std::optional<std::uint32_t> prefetch_state(std::uint64_t entity_hash) const {
        auto id = m_entity_ids.peek(entity_hash);
        if (id && *id < m_entities.size()) {
            // 48 bytes: half of them cross a cache line.
            const auto* entity = reinterpret_cast<const char*>(&m_entities[*id]);
            idem::prefetch(entity);
            idem::prefetch(entity + sizeof(Entity) - 1);
        }
        return id;
    }
    // Entities whose state changed since the last call (to save).
    [[nodiscard]] std::vector<std::pair<std::string, EntityState>> take_changed();

    // Every transition seen, first and last states: for --learn and reports.
    [[nodiscard]] Observed observed() const;
    [[nodiscard]] const std::array<std::uint64_t, k_finding_kinds>& counts() const {
        return m_counts;
    }
    [[nodiscard]] std::size_t entities() const { return m_entity_ids.size(); }
    void count(Finding finding) { ++m_counts[static_cast<std::size_t>(finding)]; }

private:
    // An entity in memory: names interned (a state is an index), so an
    // entity costs its key, its slots in the index and about 48 bytes.
    struct Entity {
        std::uint32_t state = 0;
        std::uint32_t operation = 0;
        std::uint32_t findings = 0;
        bool versioned = false;
        bool after_gap = false; // versions went missing just before: its path is unknown
        std::int64_t version = 0;
        Timestamp last_at;
        std::uint64_t events = 0;
        bool unsaved = false; // in m_changed
    };
    // What the machine says of a name, asked once per name, not per event.
    struct NameFacts {
        bool known = false, initial = false, final = false;
    };
    // Whether from -> to is allowed: for any operation, never, or it
    // depends on the operation (the machine is asked).
    enum class Allowed : std::uint8_t { always, never, by_operation };

    Entity& entity(const Event& event, std::uint32_t& id);
    std::uint32_t intern(std::string_view name);
    [[nodiscard]] bool allows(std::uint32_t from, std::uint32_t to, std::string_view operation);
    [[nodiscard]] Allowed allowed_edge(std::uint32_t from, std::uint32_t to);
    void count_transition(std::uint32_t from, std::uint32_t to, Verdict verdict);
    void count_operation(std::uint32_t from, std::uint32_t to, std::string_view operation);
    void add(Judgement& judgement, Finding finding, std::string detail);
    void changed(std::uint32_t id);
    [[nodiscard]] EntityState named(const Entity& entity) const;

    const Machine& m_machine;
    bool m_track_changes;
    KeyIndex m_entity_ids;
    HugeVector<Entity> m_entities; // by index in m_entity_ids
    KeyIndex m_name_ids;           // state and operation names
    // By id; 0 is "". Views of m_name_texts, a deque: a Judgement's `from`
    // points at a name, and interning another must not move it.
    std::vector<std::string_view> m_names;
    std::deque<std::string> m_name_texts;
    std::vector<NameFacts> m_facts;            // by id
    KeyIndex m_declared;                       // the machine's states
    std::vector<std::uint32_t> m_declared_ids; // their ids in m_name_ids
    // Between the names known at construction (ids below m_dense: "" and
    // the machine's states), what is allowed and how often it was seen
    // are kept in from * m_dense + to tables; others in the maps below.
    std::uint32_t m_dense = 0;
    std::vector<std::uint8_t> m_dense_allowed; // Allowed + 1; 0: not asked yet
    std::vector<TransitionCounts> m_dense_transitions;
    std::unordered_map<std::uint64_t, Allowed> m_allowed; // from << 32 | to
    std::vector<std::uint32_t> m_changed;
    std::unordered_map<std::uint64_t, TransitionCounts> m_transitions; // from << 32 | to
    // Transitions made by an event naming its operation (--event): from and
    // to as in m_transitions, then the operation's id in m_operation_ids.
    // Operations are not interned with the states: interning moves m_names,
    // which a judgement's names point into.
    KeyIndex m_operation_ids;
    std::vector<std::string> m_operation_names;
    struct LabelledEdge {
        std::uint64_t edge;
        std::uint32_t operation;
        bool operator==(const LabelledEdge&) const = default;
    };
    struct LabelledEdgeHash {
        std::size_t operator()(const LabelledEdge& e) const noexcept {
            return std::hash<std::uint64_t>{}(e.edge * 0x9e3779b97f4a7c15ULL ^ e.operation);
        }
    };
    std::unordered_map<LabelledEdge, std::uint64_t, LabelledEdgeHash> m_labelled_transitions;
    std::vector<std::uint64_t> m_first_states, m_last_states; // by state id
    std::array<std::uint64_t, k_finding_kinds> m_counts{};
};

} // namespace idem::states
