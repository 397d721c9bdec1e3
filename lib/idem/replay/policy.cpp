// Retry decisions, Retry-After, backoff and the retry budget.

#include "idem/replay/policy.hpp"

#include "idem/util/errors.hpp"
#include "idem/util/text.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <fmt/format.h>

namespace idem::replay {

namespace {

bool retry_after_applies(int status) {
    return status == 429 || status == 503;
}

bool retryable_status(int status) {
    return status >= 500 || status == 408 || status == 425 || status == 429;
}

} // namespace

std::optional<Duration> parse_retry_after(std::string_view value, Timestamp now) {
    value = trim(value);
    if (value.empty()) return std::nullopt;
    std::uint64_t seconds = 0;
    auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), seconds);
    if (error == std::errc() && end == value.data() + value.size())
        return std::chrono::seconds(std::min<std::uint64_t>(seconds, 1ULL << 31));
    if (auto date = parse_http_date(value)) return std::max(Duration(0), *date - now);
    return std::nullopt;
}

Judgement judge_attempt(const AttemptResult& result, const RetryRules& rules, Timestamp now) {
    Judgement judgement;
    switch (result.transport) {
    case AttemptResult::Transport::not_sent:
        judgement.verdict = Judgement::Verdict::retry;
        judgement.error = result.error;
        return judgement;
    case AttemptResult::Transport::lost_after_send:
        judgement.error = result.error;
        judgement.verdict = rules.key_use == KeyUse::with_key ? Judgement::Verdict::retry
                                                              : Judgement::Verdict::failed_for_good;
        if (rules.key_use == KeyUse::without_key)
            judgement.error += " (sent without a key: not retried)";
        return judgement;
    case AttemptResult::Transport::answered:
        break;
    }
    if (result.status >= 200 && result.status < 300) return judgement;
    judgement.error = fmt::format("http {}", result.status);
    if (!retryable_status(result.status)) {
        judgement.verdict = Judgement::Verdict::failed_for_good;
        return judgement;
    }
    judgement.verdict = Judgement::Verdict::retry;
    if (retry_after_applies(result.status) && !result.retry_after.empty()) {
        if (auto wait = parse_retry_after(result.retry_after, now))
            judgement.wait_at_least = std::min(*wait, rules.max_retry_after);
    }
    return judgement;
}

Backoff parse_backoff(std::string_view text) {
    auto dots = text.find("..");
    if (dots == std::string_view::npos)
        throw UsageError(
            fmt::format("--backoff: expected FIRST..CAP such as 1s..60s, got {}", quote(text)));
    Backoff backoff{parse_duration(text.substr(0, dots)), parse_duration(text.substr(dots + 2))};
    if (backoff.first.count() <= 0 || backoff.cap < backoff.first)
        throw UsageError(
            fmt::format("--backoff: {} needs a first delay above zero and a cap at least as large",
                        quote(text)));
    return backoff;
}

Duration backoff_delay(const Backoff& backoff, std::uint32_t retry, double uniform) {
    // Doubling stops at the cap, so no retry count can overflow it.
    Duration ceiling = backoff.first;
    for (std::uint32_t i = 1; i < retry && ceiling < backoff.cap; ++i)
        ceiling *= 2;
    ceiling = std::min(ceiling, backoff.cap);
    return Duration(static_cast<Duration::rep>(static_cast<double>(ceiling.count()) * uniform));
}

bool RetryBudget::try_spend() {
    auto allowed = m_floor + static_cast<std::uint64_t>(
                                 std::floor(m_ratio * static_cast<double>(m_first_attempts)));
    if (m_retries >= allowed) {
        ++m_refused;
        return false;
    }
    ++m_retries;
    return true;
}

} // namespace idem::replay
