#include "idem/store/detail/redis_liveness.hpp"

#include "idem/util/errors.hpp"

#include <fmt/format.h>
#include <hiredis/hiredis.h>

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

Heartbeat::Heartbeat(const std::string& host, int port, int database, std::string owner)
    : m_key(heartbeat_key(owner)) {
    timeval timeout{5, 0};
    m_context = redisConnectWithTimeout(host.c_str(), port, timeout);
    if (!m_context || m_context->err) {
        std::string message = m_context ? m_context->errstr : "out of memory";
        redisFree(m_context);
        throw StoreError(fmt::format("cannot connect to redis://{}:{} for a heartbeat: {}", host,
                                     port, message));
    }
    redisSetTimeout(m_context, timeout);
    if (database != 0) freeReplyObject(redisCommand(m_context, "SELECT %d", database));
    beat(); // before the first lease: whoever meets one sees its owner beat
    m_thread = std::jthread([this](const std::stop_token& stop) { run(stop); });
}

Heartbeat::~Heartbeat() {
    m_thread.request_stop();
    m_wake.notify_all();
    if (m_thread.joinable()) m_thread.join();
    // Leases still unconfirmed are then taken over at once, not after the
    // silence a crash would need.
    freeReplyObject(redisCommand(m_context, "DEL %b", m_key.data(), m_key.size()));
    redisFree(m_context);
}

// A failed beat is not an error here: the claims on the main connection
// meet the same Redis and report it. Missing beats make others take this
// process's unconfirmed leases over, which is what a lost Redis means anyway.
void Heartbeat::beat() {
    auto value = std::to_string(++m_count);
    auto ttl = std::to_string((k_silence_is_death + k_beat_interval).count());
    freeReplyObject(redisCommand(m_context, "SET %b %b PX %b", m_key.data(), m_key.size(),
                                 value.data(), value.size(), ttl.data(), ttl.size()));
}

void Heartbeat::run(const std::stop_token& stop) {
    std::unique_lock lock(m_mutex);
    while (!stop.stop_requested()) {
        m_wake.wait_for(lock, stop, k_beat_interval, [] { return false; });
        if (!stop.stop_requested()) beat();
    }
}

} // namespace idem::store::detail
