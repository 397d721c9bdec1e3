#include "idem/order/sequencer.hpp"

#include <algorithm>
#include <limits>

namespace idem::order {

namespace {
constexpr std::int64_t k_before_everything = std::numeric_limits<std::int64_t>::min();

bool by_key(const HeldRecord& held, const OrderKey& key) {
    return held.key < key;
}
} // namespace

Sequencer::Sequencer(SequencerOptions options, SequencerEvents& events)
    : m_options(options), m_events(events) {
    m_options.window = std::max<std::size_t>(m_options.window, 1);
    m_options.max_held = std::max<std::size_t>(m_options.max_held, 1);
}

Partition* Sequencer::find(std::string_view key) {
    auto found = m_partitions.find(key);
    return found == m_partitions.end() ? nullptr : &found->second;
}

Partition& Sequencer::add(std::string key,
                          const std::optional<order::PartitionProgress>& progress) {
    auto [slot, inserted] = m_partitions.try_emplace(std::move(key));
    auto& partition = slot->second;
    if (!inserted) return partition;
    partition.encoded_key = &slot->first;
    if (progress) {
        partition.started = progress->started;
        partition.next = progress->next;
        partition.highest = progress->highest;
    } else if (m_options.mode == OrderMode::time) {
        partition.next = {k_before_everything, 0};
    } else if (m_options.start) {
        partition.started = true;
        partition.next = {*m_options.start, 0};
        mark_dirty(partition);
    }
    return partition;
}

void Sequencer::restore(std::vector<order::HeldRecordRow> rows) {
    std::vector<Partition*> touched;
    for (auto& row : rows) {
        auto* partition = find(row.partition);
        if (!partition) continue; // the caller adds every partition first
        HeldRecord held(row.id, row.key, row.arrival, row.bytes, true);
        auto position = std::upper_bound(partition->held.begin(), partition->held.end(), held,
                                         [](const HeldRecord& left, const HeldRecord& right) {
                                             return std::pair(left.key, left.id) <
                                                    std::pair(right.key, right.id);
                                         });
        m_counts.held_bytes += held.bytes().size();
        ++m_counts.held;
        partition->held.insert(position, std::move(held));
        m_next_id = std::max(m_next_id, row.id + 1);
        touched.push_back(partition);
    }
    m_counts.peak_held = std::max(m_counts.peak_held, m_counts.held);
    m_counts.peak_held_bytes = std::max(m_counts.peak_held_bytes, m_counts.held_bytes);
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (auto* partition : touched)
        refresh_waiting(*partition);
    // A run with other flags (a smaller --window) may have to let some go.
    for (auto* partition : touched) {
        if (partition->started) release_ready(*partition);
        enforce_bounds(*partition);
    }
}

Offer Sequencer::offer(Partition& partition, OrderKey key, std::string_view bytes,
                       Timestamp arrival) {
    return m_options.mode == OrderMode::sequence ? offer_by_sequence(partition, key, bytes, arrival)
                                                 : offer_by_time(partition, key, bytes, arrival);
}

Offer Sequencer::offer_by_sequence(Partition& partition, OrderKey key, std::string_view bytes,
                                   Timestamp arrival) {
    if (partition.started && key < partition.next) {
        ++m_counts.late;
        return {Verdict::late, partition.next};
    }
    // In order, the common case: out at once, never copied.
    if (partition.started && key == partition.next) {
        emit(partition, bytes);
        partition.next.primary = key.primary + 1;
        mark_dirty(partition);
        if (!partition.held.empty()) release_ready(partition);
        return {};
    }
    auto position = std::lower_bound(partition.held.begin(), partition.held.end(), key, by_key);
    if (position != partition.held.end() && position->key == key) {
        ++m_counts.duplicates;
        return {Verdict::duplicate, key};
    }
    hold(partition, position, key, bytes, arrival);
    enforce_bounds(partition);
    return {};
}

OrderKey Sequencer::watermark(const Partition& partition) const {
    auto lateness = m_options.max_lateness.count();
    auto primary = partition.highest.primary;
    primary = primary < k_before_everything + lateness ? k_before_everything : primary - lateness;
    return {primary, lateness == 0 ? partition.highest.secondary : 0};
}

Offer Sequencer::offer_by_time(Partition& partition, OrderKey key, std::string_view bytes,
                               Timestamp arrival) {
    if (partition.started) {
        auto floor = std::max(watermark(partition), partition.next);
        if (key < floor) {
            ++m_counts.late;
            return {Verdict::late, floor};
        }
    }
    if (!partition.started || partition.highest < key) {
        partition.started = true;
        partition.highest = key;
        mark_dirty(partition);
    }
    if (partition.held.empty() && !(watermark(partition) < key)) {
        emit(partition, bytes);
        partition.next = key;
        mark_dirty(partition);
        return {};
    }
    // After the records with the same stamp: ties keep arrival order.
    auto position = std::upper_bound(
        partition.held.begin(), partition.held.end(), key,
        [](const OrderKey& wanted, const HeldRecord& held) { return wanted < held.key; });
    hold(partition, position, key, bytes, arrival);
    release_ready(partition);
    enforce_bounds(partition);
    return {};
}

void Sequencer::hold(Partition& partition, std::vector<HeldRecord>::iterator position, OrderKey key,
                     std::string_view bytes, Timestamp arrival) {
    auto id = m_next_id++;
    partition.held.insert(position, HeldRecord(id, key, arrival, bytes, false));
    ++m_counts.held;
    m_counts.held_bytes += bytes.size();
    m_counts.peak_held = std::max(m_counts.peak_held, m_counts.held);
    m_counts.peak_held_bytes = std::max(m_counts.peak_held_bytes, m_counts.held_bytes);
    if (partition.held.size() == 1)
        set_waiting(partition, id, arrival);
    else if (arrival < partition.waiting_since)
        set_waiting(partition, partition.oldest_id, arrival);
}

// --window per partition, then --max-held overall: the longest-blocked
// partition lets its lowest record go first.
void Sequencer::enforce_bounds(Partition& partition) {
    while (partition.held.size() > m_options.window)
        force_one(partition);
    while (m_counts.held > m_options.max_held && !m_blocked.empty())
        force_one(*m_blocked.begin()->second);
}

void Sequencer::release_ready(Partition& partition) {
    std::size_t ready = 0;
    if (m_options.mode == OrderMode::sequence) {
        if (!partition.started) return;
        while (ready < partition.held.size() && partition.held[ready].key == partition.next) {
            emit(partition, partition.held[ready].bytes());
            ++partition.next.primary;
            ++ready;
        }
    } else {
        auto limit = watermark(partition);
        while (ready < partition.held.size() && !(limit < partition.held[ready].key)) {
            emit(partition, partition.held[ready].bytes());
            partition.next = partition.held[ready].key;
            ++ready;
        }
    }
    if (ready == 0) return;
    mark_dirty(partition);
    drop_front(partition, ready);
}

// Lets the lowest held record go: across its gap (reported), or as the
// first of a partition that had not started, or (time mode) before the
// watermark reaches it.
void Sequencer::force_one(Partition& partition) {
    if (partition.held.empty()) return;
    auto& lowest = partition.held.front();
    if (m_options.mode == OrderMode::sequence) {
        if (partition.started && partition.next < lowest.key) {
            m_events.gap(partition, partition.next.primary, lowest.key.primary - 1);
            ++m_counts.gaps;
            m_counts.missing +=
                static_cast<std::uint64_t>(lowest.key.primary - partition.next.primary);
        }
        partition.started = true;
        partition.next = lowest.key;
        mark_dirty(partition);
        release_ready(partition);
        return;
    }
    emit(partition, lowest.bytes());
    partition.next = lowest.key;
    mark_dirty(partition);
    drop_front(partition, 1);
}

void Sequencer::emit(Partition& partition, std::string_view bytes) {
    ++m_counts.released;
    m_events.release(partition, bytes);
}

void Sequencer::drop_front(Partition& partition, std::size_t count) {
    auto& held = partition.held;
    bool oldest_gone = false;
    for (std::size_t i = 0; i < count; ++i) {
        if (held[i].persisted) m_released_ids.push_back(held[i].id);
        if (held[i].id == partition.oldest_id || !(partition.waiting_since < held[i].arrival))
            oldest_gone = true;
        m_counts.held_bytes -= held[i].bytes().size();
    }
    m_counts.held -= count;
    held.erase(held.begin(), held.begin() + static_cast<std::ptrdiff_t>(count));
    if (held.empty()) {
        // A partition with nothing held keeps no memory for it: across
        // 100k partitions, capacities left behind cost more than the records.
        std::vector<HeldRecord>().swap(held);
        clear_waiting(partition);
    } else if (oldest_gone)
        refresh_waiting(partition);
}

void Sequencer::refresh_waiting(Partition& partition) {
    if (partition.held.empty()) {
        clear_waiting(partition);
        return;
    }
    auto oldest_id = partition.held.front().id;
    auto waiting_since = partition.held.front().arrival;
    for (const auto& held : partition.held) {
        oldest_id = std::min(oldest_id, held.id);
        waiting_since = std::min(waiting_since, held.arrival);
    }
    set_waiting(partition, oldest_id, waiting_since);
}

void Sequencer::set_waiting(Partition& partition, std::uint64_t oldest_id,
                            Timestamp waiting_since) {
    clear_waiting(partition);
    partition.oldest_id = oldest_id;
    partition.waiting_since = waiting_since;
    m_blocked.emplace(oldest_id, &partition);
    if (m_options.gap_timeout.count() > 0 && m_options.mode == OrderMode::sequence)
        m_deadlines.emplace(waiting_since + m_options.gap_timeout, &partition);
}

void Sequencer::clear_waiting(Partition& partition) {
    if (partition.oldest_id == 0) return;
    m_blocked.erase({partition.oldest_id, &partition});
    if (m_options.gap_timeout.count() > 0 && m_options.mode == OrderMode::sequence)
        m_deadlines.erase({partition.waiting_since + m_options.gap_timeout, &partition});
    partition.oldest_id = 0;
}

bool Sequencer::pass_in_order(Partition& partition, OrderKey key) {
    if (!passes_in_order(partition) || !(key == partition.next)) return false;
    passed_in_order(partition, key.primary + 1, 1);
    return true;
}

void Sequencer::passed_in_order(Partition& partition, std::int64_t next, std::uint64_t count) {
    if (count == 0) return;
    m_counts.released += count;
    partition.next = {next, 0};
    mark_dirty(partition);
}

void Sequencer::mark_dirty(Partition& partition) {
    if (partition.dirty) return;
    partition.dirty = true;
    m_dirty.push_back(&partition);
}

void Sequencer::advance_clock(Timestamp now) {
    while (!m_deadlines.empty() && m_deadlines.begin()->first <= now) {
        auto* partition = m_deadlines.begin()->second;
        auto gaps_before = m_counts.gaps;
        force_one(*partition);
        m_counts.timeouts += m_counts.gaps - gaps_before;
    }
}

std::optional<Timestamp> Sequencer::next_deadline() const {
    if (m_deadlines.empty()) return std::nullopt;
    return m_deadlines.begin()->first;
}

void Sequencer::flush() {
    while (!m_blocked.empty()) {
        auto* partition = m_blocked.begin()->second;
        while (!partition->held.empty())
            force_one(*partition);
    }
}

void Sequencer::drain_changes(const std::function<void(const order::ReorderChanges&)>& save,
                              std::size_t chunk) {
    order::ReorderChanges changes;
    auto hand_over = [&](bool only_when_full) {
        auto items = changes.progress.size() + changes.held.size() + changes.released.size();
        if (items == 0 || (only_when_full && items < chunk)) return;
        save(changes);
        changes.progress.clear();
        changes.held.clear();
        changes.released.clear();
    };
    for (auto* partition : m_dirty) {
        partition->dirty = false;
        changes.progress.push_back(
            {partition->key(), partition->started, partition->next, partition->highest});
        hand_over(true);
    }
    m_dirty.clear();
    for (const auto& [oldest, partition] : m_blocked)
        for (auto& held : partition->held) {
            if (held.persisted) continue;
            held.persisted = true;
            changes.held.push_back(
                {held.id, partition->key(), held.key, held.arrival, std::string(held.bytes())});
            hand_over(true);
        }
    for (auto id : m_released_ids) {
        changes.released.push_back(id);
        hand_over(true);
    }
    m_released_ids.clear();
    hand_over(false);
}

order::ReorderChanges Sequencer::take_changes() {
    order::ReorderChanges all;
    drain_changes(
        [&](const order::ReorderChanges& changes) {
            all.progress.insert(all.progress.end(), changes.progress.begin(),
                                changes.progress.end());
            all.held.insert(all.held.end(), changes.held.begin(), changes.held.end());
            all.released.insert(all.released.end(), changes.released.begin(),
                                changes.released.end());
        },
        std::numeric_limits<std::size_t>::max());
    return all;
}

std::size_t Sequencer::forget_idle() {
    return std::erase_if(m_partitions, [](const auto& item) {
        return item.second.held.empty() && !item.second.dirty;
    });
}

} // namespace idem::order
