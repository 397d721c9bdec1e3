// The entities' states and a states run's progress in a store
// (detail/saved_entities.hpp).

#include "idem/states/detail/saved_entities.hpp"

#include "idem/store/entity_states.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

namespace idem::states::detail {

namespace {

// The run's progress is saved under the empty name, which no entity has.
const std::string k_progress_entity;

std::string encode_progress(const RunProgress& progress) {
    auto cbor = nlohmann::json::to_cbor(nlohmann::json::array(
        {progress.latest.time_since_epoch().count(), progress.arrivals, progress.stuck_at}));
    return {cbor.begin(), cbor.end()};
}

} // namespace

SavedEntities::SavedEntities(store::Store& store, std::string scope, std::string sequencer_scope,
                             Checker& checker, order::Sequencer* sequencer,
                             InOrderEntities* in_order)
    : m_store(store), m_scope(std::move(scope)), m_sequencer_scope(std::move(sequencer_scope)),
      m_checker(checker), m_sequencer(sequencer), m_in_order(in_order) {}

RunProgress SavedEntities::load_progress() {
    RunProgress progress;
    auto saved = m_store.entity_states().load_entities(m_scope, {k_progress_entity});
    if (!saved.front()) return progress;
    try {
        auto json = nlohmann::json::from_cbor(saved.front()->begin(), saved.front()->end());
        progress.latest = Timestamp(Duration(json.at(0).get<std::int64_t>()));
        progress.arrivals = json.at(1).get<std::uint64_t>();
        if (json.size() > 2) progress.stuck_at = json.at(2).get<std::uint64_t>();
    } catch (const nlohmann::json::exception&) {
        throw StoreError(fmt::format("store {}: the state of scope {} is damaged",
                                     m_store.describe(), quote(m_scope)));
    }
    return progress;
}

void SavedEntities::load_unmet(const BlockResult& block) {
    std::vector<std::string> unmet;
    std::unordered_set<std::string_view> asked;
    const auto& outcomes = block.outcomes;
    constexpr std::size_t k_prefetch_ahead = 16; // as when judging: the index is not cached
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
        if (i + k_prefetch_ahead < outcomes.size())
            m_checker.prefetch(outcomes[i + k_prefetch_ahead].entity_hash);
        const auto& outcome = outcomes[i];
        if (outcome.kind != Outcome::Kind::event) continue;
        auto entity = std::string_view(block.texts).substr(outcome.entity_at, outcome.entity_size);
        // Every entity loaded is in the checker (load() gives it a
        // partition): the sequencer is asked only about one met for the
        // first time.
        if (m_checker.known(entity, outcome.entity_hash) ||
            (m_sequencer && m_sequencer->find(entity)))
            continue;
        if (asked.insert(entity).second) unmet.emplace_back(entity);
    }
    if (!unmet.empty()) load(unmet);
}

void SavedEntities::load(const std::vector<std::string>& entities) {
    auto states = m_store.entity_states().load_entities(m_scope, entities);
    std::vector<std::optional<order::PartitionProgress>> progress(entities.size());
    if (m_sequencer) progress = m_store.sequencer().load_partitions(m_sequencer_scope, entities);
    for (std::size_t i = 0; i < entities.size(); ++i) {
        if (states[i]) {
            auto state = decode_state(*states[i]);
            if (!state)
                throw StoreError(fmt::format("store {}: the state of entity {} is damaged",
                                             m_store.describe(), quote(entities[i])));
            m_checker.restore(entities[i], *state);
            ++m_resumed;
        }
        if (m_sequencer) {
            auto& partition = m_sequencer->add(entities[i], progress[i]);
            Event event;
            event.entity = entities[i];
            m_in_order->restored(m_checker.index_of(event), partition);
        }
    }
}

std::vector<store::HeldRecordRow> SavedEntities::load_held() {
    auto rows = m_store.sequencer().load_held(m_sequencer_scope);
    std::vector<std::string> entities;
    std::unordered_set<std::string_view> seen;
    for (const auto& row : rows)
        if (seen.insert(row.partition).second) entities.push_back(row.partition);
    if (!entities.empty()) load(entities);
    return rows;
}

void SavedEntities::save(const RunProgress& progress) {
    std::vector<std::pair<std::string, std::string>> states;
    for (auto& [entity, state] : m_checker.take_changed())
        states.emplace_back(std::move(entity), encode_state(state));
    if (progress.latest != Timestamp::min())
        states.emplace_back(k_progress_entity, encode_progress(progress));
    m_store.entity_states().save_entities(m_scope, states);
    if (!m_sequencer) return;
    // Every entity passed in order since the last save is told to its
    // partition first, so the partitions saved are where the entities are.
    m_in_order->settle([&](std::uint32_t id) { return m_checker.entity_name(id); });
    m_sequencer->drain_changes([&](const order::ReorderChanges& changes) {
        m_store.sequencer().save_reorder_changes(m_sequencer_scope, changes);
    });
}

} // namespace idem::states::detail
