#pragma once
// What replay does after each attempt (docs/replay.md): complete, retry
// (after how long), or give up, and how many retries a whole run may spend.
// Pure: the caller passes the clock and the random draws.

#include "idem/util/time.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace idem::replay {

// How an attempt ended, as the transport saw it.
struct AttemptResult {
    enum class Transport {
        answered,        // an HTTP status came back
        not_sent,        // refused, unresolvable, no connection: the target never saw it
        lost_after_send, // timeout or reset once the request was on the wire
    };
    Transport transport = Transport::answered;
    int status = 0;
    std::string retry_after; // the header's value, "" when absent
    std::string error;       // transport errors: what happened
};

enum class KeyUse { with_key, without_key };

struct RetryRules {
    KeyUse key_use = KeyUse::with_key;
    Duration max_retry_after = std::chrono::minutes(5);
};

struct Judgement {
    enum class Verdict { completed, retry, failed_for_good };
    Verdict verdict = Verdict::completed;
    std::optional<Duration> wait_at_least; // Retry-After, capped
    std::string error;                     // retry and failed: why, e.g. "http 503"
};

// 2xx completes. Not sent: retry. Lost after send: retry only with a key
// (the target may have acted; the key makes a resend safe). 5xx, 408, 425,
// 429: retry, honouring Retry-After on 429 and 503. Any other status (4xx,
// and 3xx: replay follows no redirects): failed for good.
[[nodiscard]] Judgement judge_attempt(const AttemptResult& result, const RetryRules& rules,
                                      Timestamp now);

// Retry-After as delay-seconds or an HTTP-date (RFC 9110 section 10.2.3);
// nullopt when it is neither. A date in the past is a zero wait.
[[nodiscard]] std::optional<Duration> parse_retry_after(std::string_view value, Timestamp now);

// "1s..60s": exponential backoff from `first`, doubling, capped at `cap`.
struct Backoff {
    Duration first = std::chrono::seconds(1);
    Duration cap = std::chrono::seconds(60);
};
[[nodiscard]] Backoff parse_backoff(std::string_view text);

// Full jitter: a uniform draw in [0, min(cap, first * 2^(retry - 1))]
// for the retry-th retry (1-based); `uniform` is in [0, 1).
[[nodiscard]] Duration backoff_delay(const Backoff& backoff, std::uint32_t retry, double uniform);

// A run may retry at most `ratio` of its first attempts, plus a few, so a
// dead target gets one request per record and not max-attempts of them.
class RetryBudget {
public:
    explicit RetryBudget(double ratio, std::uint64_t floor = 10) : m_ratio(ratio), m_floor(floor) {}
    void count_first_attempt() { ++m_first_attempts; }
    // Takes one retry from the budget; false when it is spent.
    bool try_spend();
    [[nodiscard]] bool exhausted_once() const { return m_refused > 0; }
    [[nodiscard]] std::uint64_t refused() const { return m_refused; }
    // The retries every run may make whatever its first attempts (10).
    [[nodiscard]] std::uint64_t floor() const { return m_floor; }
    [[nodiscard]] std::uint64_t spent() const { return m_retries; }

private:
    double m_ratio;
    std::uint64_t m_floor;
    std::uint64_t m_first_attempts = 0;
    std::uint64_t m_retries = 0;
    std::uint64_t m_refused = 0;
};

} // namespace idem::replay
