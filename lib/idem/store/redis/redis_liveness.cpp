#include "idem/store/redis/redis_liveness.hpp"

#include "idem/store/redis/redis_cluster.hpp"

#include "idem/util/errors.hpp"

#include <fmt/format.h>

namespace idem::store::detail {

std::string heartbeat_key(std::string_view owner) {
    return fmt::format("idem:alive:{}", owner);
}

OwnerLiveness::Verdict OwnerLiveness::judge(const std::string& owner,
                                            const std::optional<std::string>& beat,
                                            LivenessClock::time_point now) {
    if (beat == k_goodbye) {
        m_seen.erase(owner); // it ended, confirming what it wrote out
        return Verdict::dead;
    }
    // No key: its owner has not beaten on this node for the key's life.
    // That is silence, not death: a failover of the key's master keeps a
    // live owner from beating there as long as it lasts (and the replica
    // taking over may never have had the key).
    auto value = beat.value_or(std::string(k_no_beat));
    auto [slot, first_look] = m_seen.try_emplace(owner, Seen{value, now, now, false});
    auto& seen = slot->second;
    if (first_look) return Verdict::unsure;
    // Time this observer did not look (a read that waited out a failover,
    // or no claim of this owner met for a while) is no observed silence,
    // and a change across it no observed beat: the look starts afresh.
    if (now - seen.last_look > k_observation_gap) {
        seen = Seen{value, now, now, false};
        return Verdict::unsure;
    }
    seen.last_look = now;
    if (seen.beat != value) {
        seen.beat = value;
        seen.since = now;
        // A key that expired is no beat: only a new value is.
        seen.seen_changing = beat.has_value();
        return beat ? Verdict::alive : Verdict::unsure;
    }
    if (now - seen.since > k_silence_is_death) return Verdict::dead;
    return seen.seen_changing ? Verdict::alive : Verdict::unsure;
}

Heartbeat::Heartbeat(const std::vector<RedisEndpoint>& seeds, int database, const std::string& name,
                     std::string owner)
    : m_redis(std::make_unique<RedisRouter>(seeds, database, name)), m_key(heartbeat_key(owner)) {
    beat(); // before the first lease: whoever meets one sees its owner beat
    m_thread = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

Heartbeat::~Heartbeat() {
    m_thread.request_stop();
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
    // Claims still unconfirmed are then taken over at once, not after the
    // silence a crash would need: the goodbye says it ended (an absent key
    // only says it has not beaten there lately).
    try {
        (void)m_redis->command({"SET", m_key, std::string(k_goodbye), "PX",
                                std::to_string((k_silence_is_death + k_beat_interval).count())},
                               m_key);
    } catch (const StoreError&) {
    }
}

// A failed beat is not an error here: the claims on the main connection
// meet the same Redis and report it. Missing beats make others take this
// process's unconfirmed claims over, which is what a lost Redis means anyway.
void Heartbeat::beat() {
    auto value = std::to_string(++m_count);
    auto ttl = std::to_string((k_silence_is_death + k_beat_interval).count());
    try {
        (void)m_redis->command({"SET", m_key, value, "PX", ttl}, m_key);
    } catch (const StoreError&) {
    }
}

void Heartbeat::run(const std::stop_token& stop) {
    std::unique_lock lock(m_mutex);
    while (!stop.stop_requested()) {
        m_wake.wait_for(lock, stop, k_beat_interval, [] { return false; });
        if (!stop.stop_requested()) beat();
    }
}

} // namespace idem::store::detail
