#pragma once
// Internal to the Redis store: whether the process that made a dedup claim
// is still alive. A first copy's claim counts once its owner confirms the
// batch, after flushing its output; a process killed in between leaves
// claims nobody will confirm. Each process that claims beats a heartbeat
// key; a process that meets another's unconfirmed claim asks whether that
// owner still beats, and takes the claim over when it does not, instead of
// counting the record as a duplicate of a copy that was never emitted.

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

namespace idem::store::detail {

class RedisRouter;
struct RedisEndpoint;

using LivenessClock = std::chrono::steady_clock;

// How often an owner beats, and how long a beat that does not change means
// its owner is gone. Generous against a loaded machine: a live owner judged
// dead would have its claims taken over and its events emitted twice.
inline constexpr std::chrono::milliseconds k_beat_interval{500};
inline constexpr std::chrono::milliseconds k_silence_is_death{3000};
// Looks further apart than this (an observer's read that waited out a
// failover, or a claim of that owner met again later) watch afresh.
inline constexpr std::chrono::milliseconds k_observation_gap{2 * k_beat_interval};

// "idem:alive:OWNER"
[[nodiscard]] std::string heartbeat_key(std::string_view owner);

// What a heartbeat key holds once its owner has ended (its claims are then
// taken over at once), and what an absent key is judged as.
inline constexpr std::string_view k_goodbye = "gone";
inline constexpr std::string_view k_no_beat = "";

// What one process has seen of other owners' heartbeats. Pure: the caller
// reads the heartbeat key and the clock.
class OwnerLiveness {
public:
    enum class Verdict { alive, dead, unsure };

    // `beat` is the heartbeat key's value now (nullopt: no key). An owner
    // is dead once it said goodbye, or once its beat (or the key's absence)
    // stood still for k_silence_is_death of looks no further apart than
    // k_observation_gap; alive once a new value was seen within such looks.
    // Unsure means: look again a little later.
    Verdict judge(const std::string& owner, const std::optional<std::string>& beat,
                  LivenessClock::time_point now);

private:
    struct Seen {
        std::string beat;
        LivenessClock::time_point since;     // when this value was first seen
        LivenessClock::time_point last_look; // when the key was last read
        bool seen_changing = false;          // the owner has been seen beating
    };
    std::unordered_map<std::string, Seen> m_seen;
};

// Beats this process's heartbeat on a connection of its own, every
// k_beat_interval, until destroyed (which deletes the key).
class Heartbeat {
public:
    // A connection of its own (to the node of its key, on a cluster).
    Heartbeat(const std::vector<RedisEndpoint>& seeds, int database, const std::string& name,
              std::string owner);
    ~Heartbeat();
    Heartbeat(const Heartbeat&) = delete;
    Heartbeat& operator=(const Heartbeat&) = delete;

private:
    void beat();
    void run(const std::stop_token& stop);

    std::unique_ptr<RedisRouter> m_redis;
    std::string m_key;
    std::uint64_t m_count = 0;
    std::mutex m_mutex;
    std::condition_variable_any m_wake;
    std::jthread m_thread;
};

} // namespace idem::store::detail
