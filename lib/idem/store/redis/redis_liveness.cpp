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
    if (!beat) {
        m_seen.erase(owner); // gone: its key expired or it said goodbye
        return Verdict::dead;
    }
    auto [slot, first_look] = m_seen.try_emplace(owner, Seen{*beat, now, false});
    auto& seen = slot->second;
    if (first_look) return Verdict::unsure;
    if (seen.beat != *beat) {
        seen.beat = *beat;
        seen.since = now;
        seen.seen_changing = true;
        return Verdict::alive;
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
    // silence a crash would need.
    try {
        (void)m_redis->command({"DEL", m_key}, m_key);
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
