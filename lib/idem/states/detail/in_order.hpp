#pragma once
// Internal to states: where each entity's next event is judged while its
// events come in order. Such an entity needs no partition in the
// sequencer, only its next version here: with 100k entities a partition
// each cost an allocation, ~150 bytes and a cache miss per event. The
// first event out of order (or the store, which saves progress by
// partition) makes one, and what was passed here is told to it
// (Sequencer::passed_in_order) before it is offered anything and before
// progress is saved.

#include "idem/order/sequencer.hpp"
#include "idem/util/huge_pages.hpp"
#include "idem/util/prefetch.hpp"

#include <cstdint>
#include <functional>
#include <string_view>
#include <vector>

namespace idem::states::detail {

class InOrderEntities {
public:
    // `remember_passed`: a store saves progress, so the entities passed in
    // order are listed for settle().
    InOrderEntities(order::Sequencer& sequencer, bool remember_passed)
        : m_sequencer(sequencer), m_remember_passed(remember_passed) {}

    // An entity met for the first time (the store, if any, knew nothing of
    // it): by version it starts at `first_version` like a new partition
    // would, without one; by time, it asks the sequencer.
    void meet(std::uint32_t id, bool by_version, std::int64_t first_version) {
        auto& entity = at(id);
        if (entity.met) return;
        entity.met = true;
        entity.nothing_held = by_version;
        entity.next = first_version;
    }

    // Whether the event at `primary` is next in its entity's order with
    // nothing waiting: then it is passed here, to be judged at once.
    bool pass(std::uint32_t id, std::int64_t primary) {
        auto& entity = at(id);
        if (!entity.nothing_held || primary != entity.next) return false;
        ++entity.next;
        // Without a store a partition is told when it is next offered
        // something.
        if (entity.passed++ == 0 && m_remember_passed) m_passed.push_back(id);
        return true;
    }

    // The entity's partition in the sequencer, made if it has none yet, and
    // told what was passed in order without it.
    order::Partition& partition_of(std::uint32_t id, std::string_view name) {
        auto& entity = at(id);
        if (!entity.partition) entity.partition = &m_sequencer.add(std::string(name), std::nullopt);
        if (entity.passed > 0) {
            m_sequencer.passed_in_order(*entity.partition, entity.next, entity.passed);
            entity.passed = 0;
        }
        return *entity.partition;
    }

    // After the sequencer was offered an event: the partition says what
    // comes next.
    void offered(std::uint32_t id, const order::Partition& partition) {
        auto& entity = at(id);
        entity.nothing_held = m_sequencer.passes_in_order(partition);
        entity.next = partition.next.primary;
    }

    // A partition the store had for the entity: its first event asks it.
    void restored(std::uint32_t id, order::Partition& partition) {
        auto& entity = at(id);
        entity.partition = &partition;
        entity.met = true;
        entity.nothing_held = false;
    }

    // Before progress is saved: every entity passed in order since, told
    // (`name_of` gives an entity's name by its index).
    void settle(const std::function<std::string_view(std::uint32_t)>& name_of) {
        for (auto id : m_passed)
            if (m_entities[id].passed > 0) partition_of(id, name_of(id));
        m_passed.clear();
    }

    void prefetch(std::uint32_t id) const {
        if (id < m_entities.size()) idem::prefetch(&m_entities[id]);
    }
    // The entity's partition, when its next event goes to the sequencer.
    [[nodiscard]] const order::Partition* waiting_partition(std::uint32_t id) const {
        if (id >= m_entities.size() || m_entities[id].nothing_held) return nullptr;
        return m_entities[id].partition;
    }

private:
    struct Entity {
        order::Partition* partition = nullptr;
        std::int64_t next = 0;    // the version judged at once when it comes
        std::uint32_t passed = 0; // judged here since the partition was told
        bool met = false;
        bool nothing_held = false; // the partition (or none) holds nothing: `next` may pass
    };

    Entity& at(std::uint32_t id) {
        if (id >= m_entities.size()) m_entities.resize(id + 1);
        return m_entities[id];
    }

    order::Sequencer& m_sequencer;
    bool m_remember_passed;
    HugeVector<Entity> m_entities;       // by the checker's entity index
    std::vector<std::uint32_t> m_passed; // with a store: passed in order since the last save
};

} // namespace idem::states::detail
