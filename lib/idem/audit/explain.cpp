#include "idem/audit/explain.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstddef>
#include <fmt/format.h>
#include <iterator>
#include <map>
#include <memory_resource>
#include <set>

namespace idem::audit {

std::string_view cause_name(Cause cause) {
    switch (cause) {
    case Cause::retry_storm:
        return "retry-storm";
    case Cause::concurrent:
        return "concurrent";
    case Cause::ttl_expired:
        return "ttl-expired";
    case Cause::key_reuse:
        return "key-reuse";
    case Cause::key_regenerated:
        return "key-regenerated";
    case Cause::retried_after_failure:
        return "retried-after-failure";
    case Cause::provider_retry:
        return "provider-retry";
    case Cause::replayed_delivery:
        return "replayed-delivery";
    case Cause::tampered:
        return "tampered";
    case Cause::re_serialized:
        return "re-serialized";
    case Cause::fan_out:
        return "fan-out";
    case Cause::layered_retry:
        return "layered-retry";
    case Cause::unexplained:
        return "unexplained";
    }
    return "unexplained";
}

std::optional<Cause> parse_cause(std::string_view name) {
    for (auto cause : k_all_causes)
        if (cause_name(cause) == name) return cause;
    return std::nullopt;
}

std::string_view provider_name(Provider provider) {
    switch (provider) {
    case Provider::stripe:
        return "stripe";
    case Provider::svix:
        return "svix";
    case Provider::shopify:
        return "shopify";
    case Provider::github:
        return "github";
    case Provider::slack:
        return "slack";
    case Provider::twilio:
        return "twilio";
    case Provider::unknown:
        break;
    }
    return "unknown";
}

std::optional<Provider> parse_provider(std::string_view name) {
    for (auto provider : {Provider::stripe, Provider::svix, Provider::shopify, Provider::github,
                          Provider::slack, Provider::twilio})
        if (provider_name(provider) == name) return provider;
    if (name == "standard-webhooks") return Provider::svix; // Svix's schedule, by its own name
    return std::nullopt;
}

bool signs_each_attempt(Provider provider) {
    return provider == Provider::stripe || provider == Provider::svix ||
           provider == Provider::slack;
}

SignatureVerdict classify_verdict(bool valid, std::string_view reason) {
    if (valid) return SignatureVerdict::valid;
    // verify's own words (lib/idem/verify): a signature over other bytes,
    // or a signed time past the tolerance, or a message id seen before.
    if (reason.starts_with("signature does not match") ||
        reason.find("does not match the body") != std::string_view::npos)
        return SignatureVerdict::mismatch;
    if (reason.starts_with("replayed:") ||
        (reason.starts_with("timestamp ") && reason.find(" old, beyond the ") != reason.npos))
        return SignatureVerdict::stale;
    return SignatureVerdict::invalid;
}

std::int64_t signed_seconds(std::string_view text) {
    // Stripe's header: the t= element among the comma-separated ones.
    if (auto at = text.find("t="); at != text.npos && (at == 0 || text[at - 1] == ',')) {
        text.remove_prefix(at + 2);
        text = text.substr(0, text.find(','));
    }
    std::int64_t seconds = 0;
    auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (error != std::errc() || end != text.data() + text.size() || seconds <= 0) return 0;
    return seconds;
}

bool is_failed_answer(std::uint16_t status) {
    return status == k_no_answer || status == 408 || status == 429 || status >= 500;
}

namespace {

// A group's working sets and maps come from one arena per thread, emptied
// when the group is explained (ArenaScope): most groups hold two or three
// records, and a node allocated and freed per value, a dozen a group, cost
// more than explaining it. Nothing taken from it outlives explain().
class GroupArena {
public:
    GroupArena() : m_resource(m_first.data(), m_first.size()) {}
    std::pmr::memory_resource* resource() { return &m_resource; }
    void release() { m_resource.release(); }

private:
    std::array<std::byte, 32 * 1024> m_first{}; // a usual group never asks for more
    std::pmr::monotonic_buffer_resource m_resource;
};

GroupArena& thread_arena() {
    thread_local GroupArena arena;
    return arena;
}

std::pmr::memory_resource* scratch() {
    return thread_arena().resource();
}

// Empties the thread's arena when the group's explanation is done; made
// before any container that uses it, so it is the last thing undone.
struct ArenaScope {
    ArenaScope() = default;
    ArenaScope(const ArenaScope&) = delete;
    ArenaScope& operator=(const ArenaScope&) = delete;
    ~ArenaScope() { thread_arena().release(); }
};

// A sender that tried again after the receiver failed it: each record that
// follows, from the same source, one answered 5xx, 408, 429 or not at all.
// The failed records and the retries are the evidence; the gaps are the
// retries' waits.
void find_retries_after_failure(const Explanation& group, const std::vector<Attempt>& attempts,
                                const std::vector<bool>& judged, std::vector<Evidence>& found) {
    Evidence evidence{Cause::retried_after_failure, {}, {}, 0, {}, {}, {}};
    std::pmr::map<std::uint32_t, std::size_t> last_of_source(scratch());
    std::pmr::set<std::size_t> involved(scratch());
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        if (judged[i]) continue; // not the sender's attempt
        const auto& attempt = attempts[group.records[i]];
        auto previous = last_of_source.find(attempt.source);
        if (previous != last_of_source.end()) {
            const auto& before = attempts[group.records[previous->second]];
            if (is_failed_answer(before.status)) {
                if (involved.insert(previous->second).second)
                    evidence.records.push_back(previous->second);
                if (involved.insert(i).second) evidence.records.push_back(i);
                if (before.time && attempt.time)
                    evidence.gaps.push_back(*attempt.time - *before.time);
            }
        }
        last_of_source[attempt.source] = i;
    }
    if (evidence.records.empty()) return;
    std::sort(evidence.records.begin(), evidence.records.end());
    found.push_back(std::move(evidence));
}

// Three or more attempts from one source whose gaps grow like a backoff
// schedule: the longest gap of the later half is at least 1.5x the longest
// of the earlier half. Nested retry layers (3 x 2 x 2) interleave short and
// long gaps; their envelope still grows, a steady poll's does not.
void find_retry_storms(const Explanation& group, const std::vector<Attempt>& attempts,
                       const std::vector<bool>& judged, std::vector<Evidence>& found) {
    std::pmr::map<std::uint32_t, std::vector<std::size_t>> by_source(scratch());
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& attempt = attempts[group.records[i]];
        if (attempt.time && !judged[i]) by_source[attempt.source].push_back(i);
    }
    for (const auto& [source, records] : by_source) {
        if (records.size() < 3) continue;
        std::vector<Duration> gaps;
        for (std::size_t i = 1; i < records.size(); ++i)
            gaps.push_back(*attempts[group.records[records[i]]].time -
                           *attempts[group.records[records[i - 1]]].time);
        auto half = (gaps.size() + 1) / 2;
        auto earlier = *std::max_element(gaps.begin(), gaps.begin() + static_cast<long>(half));
        auto later = *std::max_element(gaps.begin() + static_cast<long>(half), gaps.end());
        if (gaps.size() < 2 || earlier.count() <= 0 || later * 2 < earlier * 3) continue;
        found.push_back({Cause::retry_storm, records, gaps, source, {}, {}, {}});
    }
}

// Records from different sources within the race window of each other.
void find_races(const Explanation& group, const std::vector<Attempt>& attempts,
                Duration race_window, std::vector<Evidence>& found) {
    Evidence evidence{Cause::concurrent, {}, {}, 0, {}, {}, {}};
    std::pmr::set<std::size_t> involved(scratch());
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& left = attempts[group.records[i]];
        if (!left.time) continue;
        for (std::size_t j = i + 1; j < group.records.size(); ++j) {
            const auto& right = attempts[group.records[j]];
            if (!right.time) continue;
            auto apart = *right.time - *left.time;
            if (apart > race_window) break; // records are in time order
            if (left.source == right.source) continue;
            if (involved.insert(i).second) evidence.records.push_back(i);
            if (involved.insert(j).second) evidence.records.push_back(j);
            evidence.gaps.push_back(apart);
        }
    }
    if (!evidence.records.empty()) {
        std::sort(evidence.records.begin(), evidence.records.end());
        found.push_back(std::move(evidence));
    }
}

// Under one key, a copy more than the TTL after the key's claim, judged as
// dedup judges (what_if.cpp does the same): the first copy claims the key,
// copies within the TTL of that claim are caught and leave it as it is, and
// the first copy past it finds the claim expired and claims the key anew.
// The evidence is each expired claim's record and the copy that passed,
// with the time since the claim.
void find_expired(const Explanation& group, const std::vector<Attempt>& attempts, Duration ttl,
                  std::vector<Evidence>& found) {
    Evidence evidence{Cause::ttl_expired, {}, {}, 0, {}, {}, {}};
    std::optional<std::size_t> claim;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        if (!attempts[group.records[i]].time) continue;
        if (!claim) {
            claim = i;
            continue;
        }
        auto since = *attempts[group.records[i]].time - *attempts[group.records[*claim]].time;
        if (since <= ttl) continue;
        if (evidence.records.empty() || evidence.records.back() != *claim)
            evidence.records.push_back(*claim);
        evidence.records.push_back(i);
        evidence.gaps.push_back(since);
        claim = i;
    }
    if (!evidence.records.empty()) found.push_back(std::move(evidence));
}

// The first record of each distinct value of `field`, when there are several.
template <typename Field>
std::vector<std::size_t> first_of_each(const Explanation& group,
                                       const std::vector<Attempt>& attempts, Field field) {
    std::vector<std::size_t> firsts;
    std::pmr::set<std::uint64_t> seen(scratch());
    for (std::size_t i = 0; i < group.records.size(); ++i)
        if (seen.insert(field(attempts[group.records[i]])).second) firsts.push_back(i);
    return firsts;
}

// One business intent under several keys, within the window of each other.
void find_regenerated(const Explanation& group, const std::vector<Attempt>& attempts,
                      Duration window, std::vector<Evidence>& found) {
    // Records without a key say nothing about keys.
    auto firsts =
        first_of_each(group, attempts, [](const Attempt& attempt) { return attempt.key; });
    std::erase_if(firsts, [&](std::size_t i) { return attempts[group.records[i]].key == 0; });
    if (firsts.size() < 2) return;
    Evidence evidence{Cause::key_regenerated, {}, {}, 0, {}, {}, {}};
    for (std::size_t i = 0; i < firsts.size(); ++i) {
        const auto& attempt = attempts[group.records[firsts[i]]];
        bool near_another = false;
        for (std::size_t j = 0; j < firsts.size() && !near_another; ++j) {
            const auto& other = attempts[group.records[firsts[j]]];
            if (i == j || other.key == attempt.key) continue;
            near_another = !attempt.time || !other.time ||
                           (*attempt.time > *other.time ? *attempt.time - *other.time
                                                        : *other.time - *attempt.time) <= window;
        }
        if (near_another) evidence.records.push_back(firsts[i]);
    }
    for (std::size_t i = 1; i < evidence.records.size(); ++i) {
        const auto& before = attempts[group.records[evidence.records[i - 1]]];
        const auto& after = attempts[group.records[evidence.records[i]]];
        if (before.time && after.time) evidence.gaps.push_back(*after.time - *before.time);
    }
    if (evidence.records.size() >= 2) found.push_back(std::move(evidence));
}

// What each provider publishes about its retries (docs/audit.md cites the
// pages): the delays before each retry, counted from the failure of the
// attempt before, when published; otherwise the bounds it states.
struct RetrySchedule {
    std::vector<Duration> delays; // delay before retry k (attempt k + 1); empty: not published
    std::size_t max_retries = 0;  // 0: not bounded by count
    Duration span{};              // every retry within this of the first attempt
    Duration timeout{};           // how long the provider waits for an answer
    std::string_view description;
};

const RetrySchedule& schedule_of(Provider provider) {
    using std::chrono::hours, std::chrono::minutes, std::chrono::seconds;
    static const RetrySchedule svix{
        {seconds(5), minutes(5), minutes(30), hours(2), hours(5), hours(10), hours(10)},
        7,
        hours(28),
        seconds(15),
        "svix / Standard Webhooks schedule: immediately, then 5s, 5m, 30m, 2h, 5h, 10h, 10h"};
    static const RetrySchedule slack{{seconds(0), minutes(1), minutes(5)},
                                     3,
                                     minutes(7),
                                     seconds(3),
                                     "slack Events API: retried at once, after 1m, after 5m"};
    static const RetrySchedule shopify{
        {}, 8, hours(4), seconds(5), "shopify: 8 retries over 4h with exponential backoff"};
    static const RetrySchedule stripe{
        {},
        0,
        hours(72),
        seconds(20),
        "stripe: retries with exponential backoff for up to 3 days (intervals not published)"};
    static const RetrySchedule twilio{{},
                                      5,
                                      minutes(1),
                                      seconds(15),
                                      "twilio: retried within seconds on a connect failure or "
                                      "timeout, as the URL's connection override (#rc=) asks"};
    static const RetrySchedule github{
        {},
        0,
        {},
        seconds(10),
        "github: no automatic redelivery; a repeat is a manual \"Redeliver\""};
    static const RetrySchedule none{};
    switch (provider) {
    case Provider::svix:
        return svix;
    case Provider::slack:
        return slack;
    case Provider::shopify:
        return shopify;
    case Provider::stripe:
        return stripe;
    case Provider::twilio:
        return twilio;
    case Provider::github:
        return github;
    case Provider::unknown:
        break;
    }
    return none;
}

// Whether `gap` is the wait of `skipped` consecutive retries starting at
// retry `from` (0-based) of a published schedule: their delays, each plus up
// to the provider's answer timeout, with 20% either way for jitter and
// queueing, and 2 s of clock slack.
bool gap_fits_delays(const RetrySchedule& schedule, std::size_t from, std::size_t skipped,
                     Duration gap) {
    Duration total{};
    for (std::size_t k = from; k < from + skipped; ++k)
        total += schedule.delays[k];
    auto slack = std::chrono::seconds(2);
    auto low = total * 4 / 5 - slack;
    auto high = total * 6 / 5 + schedule.timeout * static_cast<long>(skipped) + slack;
    return gap >= low && gap <= high;
}

// The attempt numbers of copies `records` (time order, one route) under
// `provider`'s schedule, or nothing when their gaps do not fit it.
std::optional<std::vector<std::uint16_t>> attempts_under(Provider provider,
                                                         const std::vector<std::size_t>& records,
                                                         const Explanation& group,
                                                         const std::vector<Attempt>& attempts) {
    const auto& schedule = schedule_of(provider);
    auto time_of = [&](std::size_t i) { return *attempts[group.records[records[i]]].time; };
    std::vector<std::uint16_t> numbers;
    // The provider's own counter, when every copy carries one (Slack's
    // X-Slack-Retry-Num): it is the evidence, and it must rise.
    bool counted = std::all_of(records.begin(), records.end(), [&](std::size_t i) {
        return attempts[group.records[i]].trace.provider_attempt != 0;
    });
    auto first_attempt = attempts[group.records[records.front()]].trace.provider_attempt;
    if (counted) {
        for (auto i : records)
            numbers.push_back(attempts[group.records[i]].trace.provider_attempt);
        for (std::size_t i = 1; i < numbers.size(); ++i)
            if (numbers[i] <= numbers[i - 1]) return std::nullopt;
        return numbers;
    }
    if (schedule.span.count() > 0 &&
        time_of(records.size() - 1) - time_of(0) >
            schedule.span + schedule.timeout * static_cast<long>(records.size()))
        return std::nullopt;
    if (schedule.max_retries > 0 && records.size() > schedule.max_retries + 1) return std::nullopt;
    if (provider == Provider::github) {
        for (std::size_t i = 0; i < records.size(); ++i)
            numbers.push_back(static_cast<std::uint16_t>(i + 1));
        return numbers;
    }
    if (!schedule.delays.empty()) {
        std::size_t attempt = first_attempt ? first_attempt : 1; // of the first copy seen
        numbers.push_back(static_cast<std::uint16_t>(attempt));
        for (std::size_t i = 1; i < records.size(); ++i) {
            auto gap = time_of(i) - time_of(i - 1);
            std::size_t skipped = 1;
            // A copy the log missed: the gap spans several retries.
            while (attempt - 1 + skipped <= schedule.delays.size() &&
                   !gap_fits_delays(schedule, attempt - 1, skipped, gap))
                ++skipped;
            if (attempt - 1 + skipped > schedule.delays.size()) return std::nullopt;
            attempt += skipped;
            numbers.push_back(static_cast<std::uint16_t>(attempt));
        }
        return numbers;
    }
    // Unpublished intervals with exponential backoff: each wait at least
    // about as long as the one before (half of it, for jitter), beyond
    // the provider's answer timeout for an automatic retry (Twilio retries
    // within it).
    for (std::size_t i = 0; i < records.size(); ++i) {
        numbers.push_back(static_cast<std::uint16_t>(i + 1));
        if (i < 2) continue;
        auto before = time_of(i - 1) - time_of(i - 2);
        auto now = time_of(i) - time_of(i - 1);
        if (provider != Provider::twilio && now * 2 < before) return std::nullopt;
    }
    return numbers;
}

std::string attempt_list(const std::vector<std::uint16_t>& numbers) {
    std::vector<std::string> parts;
    for (auto number : numbers)
        parts.push_back(std::to_string(number));
    return fmt::format("{}", fmt::join(parts, ", "));
}

// A signed copy that is not a fresh attempt of its provider (docs/audit.md,
// "Retry, replay or tampering"). On one route, a copy carrying an earlier
// copy's signing -- its signed time, for a provider that signs every
// attempt afresh; its signature, for the others -- is that delivery sent
// again: over the same bytes a replayed-delivery (when it came later than a
// fresh signing within the same second could: more than 2 s), over bytes
// that encode the same JSON re-serialized, over other bytes tampered. With
// --verdicts, a copy verify found stale (where it found another fresh) is
// a replayed-delivery, and one whose signature did not match is
// re-serialized or tampered by whether its body's JSON equals a valid
// copy's. `judged` marks the copies named, which
// no provider-retry then counts.
void find_signed_copies(const Explanation& group, const std::vector<Attempt>& attempts,
                        std::vector<Evidence>& found, std::vector<bool>& judged) {
    constexpr auto k_fresh_signing = std::chrono::seconds(2);
    Evidence replayed{Cause::replayed_delivery, {}, {}, 0, {}, {}, {}};
    Evidence tampered{Cause::tampered, {}, {}, 0, {}, {}, {}};
    Evidence reserialized{Cause::re_serialized, {}, {}, 0, {}, {}, {}};
    auto copy_of = [&](std::size_t i) -> const Attempt& { return attempts[group.records[i]]; };
    auto same_route = [](const DeliveryTrace& a, const DeliveryTrace& b) {
        return a.provider == b.provider && a.endpoint == b.endpoint &&
               a.subscription == b.subscription;
    };
    auto name = [&](Evidence& evidence, std::size_t i, std::size_t original) {
        evidence.records.push_back(i);
        evidence.originals.push_back(original);
        const auto& later = copy_of(i);
        if (original != k_no_original && later.time && copy_of(original).time)
            evidence.gaps.push_back(*later.time - *copy_of(original).time);
        judged[i] = true;
    };
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& trace = copy_of(i).trace;
        const auto& signing = trace.signed_copy;
        if (trace.provider == Provider::unknown) continue;
        bool afresh = signs_each_attempt(trace.provider);
        std::optional<std::size_t> original;
        for (std::size_t j = 0; j < i && !original; ++j) {
            const auto& earlier = copy_of(j).trace;
            if (!same_route(trace, earlier)) continue;
            if (afresh
                    ? signing.signed_at != 0 && earlier.signed_copy.signed_at == signing.signed_at
                    : signing.signature != 0 && earlier.signed_copy.signature == signing.signature)
                original = j;
        }
        if (original) {
            const auto& first = copy_of(*original).trace.signed_copy;
            if (signing.body != first.body) {
                bool same_json = signing.canonical != 0 && signing.canonical == first.canonical;
                name(same_json ? reserialized : tampered, i, *original);
                continue;
            }
            const auto& later = copy_of(i);
            const auto& before = copy_of(*original);
            if (afresh && later.time && before.time &&
                *later.time - *before.time > k_fresh_signing) {
                name(replayed, i, *original);
                continue;
            }
        }
        // Stale by verify's clock, where verify found another copy fresh: a
        // verify run long after the capture finds every copy stale, and
        // names no replay by that.
        bool another_fresh = false;
        for (std::size_t j = 0; j < group.records.size() && !another_fresh; ++j)
            another_fresh =
                j != i && copy_of(j).trace.signed_copy.verdict == SignatureVerdict::valid;
        if (signing.verdict == SignatureVerdict::stale && another_fresh) {
            name(replayed, i, original.value_or(k_no_original));
        } else if (signing.verdict == SignatureVerdict::mismatch) {
            // Compared with a copy whose signature matched, else with any other.
            std::optional<std::size_t> valid;
            for (std::size_t j = 0; j < group.records.size() && !valid; ++j)
                if (j != i && copy_of(j).trace.signed_copy.verdict == SignatureVerdict::valid)
                    valid = j;
            bool same_json = valid && signing.canonical != 0 &&
                             copy_of(*valid).trace.signed_copy.canonical == signing.canonical;
            name(same_json ? reserialized : tampered, i, valid.value_or(k_no_original));
        }
    }
    for (auto* evidence : {&replayed, &tampered, &reserialized})
        if (!evidence->records.empty()) found.push_back(std::move(*evidence));
}

// Copies of one delivery (one provider, one endpoint and subscription)
// whose waits fit the provider's published retry behaviour; copies
// find_signed_copies() named are not attempts of it.
void find_provider_retries(const Explanation& group, const std::vector<Attempt>& attempts,
                           const std::vector<bool>& judged, std::vector<Evidence>& found) {
    std::pmr::map<std::tuple<Provider, std::uint32_t, std::uint32_t>, std::vector<std::size_t>>
        routes(scratch());
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& attempt = attempts[group.records[i]];
        if (attempt.trace.provider == Provider::unknown || !attempt.time || judged[i]) continue;
        routes[{attempt.trace.provider, attempt.trace.endpoint, attempt.trace.subscription}]
            .push_back(i);
    }
    for (const auto& [route, records] : routes) {
        if (records.size() < 2) continue;
        auto provider = std::get<0>(route);
        auto numbers = attempts_under(provider, records, group, attempts);
        if (!numbers) continue;
        Evidence evidence{Cause::provider_retry, records, {}, 0, *numbers, {}, {}};
        for (std::size_t i = 1; i < records.size(); ++i)
            evidence.gaps.push_back(*attempts[group.records[records[i]]].time -
                                    *attempts[group.records[records[i - 1]]].time);
        const auto& schedule = schedule_of(provider);
        // The attempts and what went wrong first: the table shows 80 columns.
        evidence.detail =
            provider == Provider::github
                ? fmt::format("github copies {}: redelivered by hand", attempt_list(*numbers))
                : fmt::format("{} attempts {}", provider_name(provider), attempt_list(*numbers));
        // A success the provider did not see in time: it retried anyway.
        std::vector<std::uint16_t> answered_ok;
        for (std::size_t i = 0; i + 1 < records.size(); ++i) {
            auto status = attempts[group.records[records[i]]].status;
            if (status >= 200 && status < 300) answered_ok.push_back((*numbers)[i]);
        }
        if (!answered_ok.empty() && provider != Provider::github)
            evidence.detail += fmt::format(
                "; 2xx to attempt {} yet retried: the answer came too late (past {}s) or never "
                "arrived",
                attempt_list(answered_ok),
                std::chrono::duration_cast<std::chrono::seconds>(schedule.timeout).count());
        evidence.detail += fmt::format(" ({})", schedule.description);
        found.push_back(std::move(evidence));
    }
}

// One event delivered to several endpoints or subscriptions at nearly the
// same time: two webhook endpoints, an old and a new subscription.
void find_fan_out(const Explanation& group, const std::vector<Attempt>& attempts, Duration window,
                  std::vector<Evidence>& found) {
    std::pmr::map<std::pair<std::uint32_t, std::uint32_t>, std::size_t> first_of_route(scratch());
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& trace = attempts[group.records[i]].trace;
        if (trace.endpoint == 0 && trace.subscription == 0) continue;
        first_of_route.try_emplace({trace.endpoint, trace.subscription}, i);
    }
    if (first_of_route.size() < 2) return;
    std::vector<std::size_t> firsts;
    for (const auto& [route, index] : first_of_route)
        firsts.push_back(index);
    std::sort(firsts.begin(), firsts.end());
    const auto& earliest = attempts[group.records[firsts.front()]];
    Evidence evidence{Cause::fan_out, {firsts.front()}, {}, 0, {}, {}, {}};
    bool endpoints_differ = false;
    for (std::size_t n = 1; n < firsts.size(); ++n) {
        const auto& copy = attempts[group.records[firsts[n]]];
        if (!earliest.time || !copy.time || *copy.time - *earliest.time > window) continue;
        evidence.records.push_back(firsts[n]);
        evidence.gaps.push_back(*copy.time - *earliest.time);
        endpoints_differ = endpoints_differ || copy.trace.endpoint != earliest.trace.endpoint;
    }
    if (evidence.records.size() < 2) return;
    evidence.detail = endpoints_differ ? "endpoint" : "subscription";
    found.push_back(std::move(evidence));
}

// Nested retry layers (--attempt-field, outermost first): each layer that
// tried more than once multiplies the copies of one intent.
void find_layers(const Explanation& group, const std::vector<Attempt>& attempts,
                 const std::vector<std::string>& names,
                 const std::array<std::uint8_t, k_max_layers>& most, std::vector<Evidence>& found) {
    if (names.empty()) return;
    std::vector<std::set<std::uint8_t>> seen(std::min(names.size(), k_max_layers));
    std::vector<std::size_t> carrying;
    for (std::size_t i = 0; i < group.records.size(); ++i) {
        const auto& layers = attempts[group.records[i]].trace.layers;
        bool any = false;
        for (std::size_t layer = 0; layer < seen.size(); ++layer)
            if (layers[layer]) {
                seen[layer].insert(layers[layer]);
                any = true;
            }
        if (any) carrying.push_back(i);
    }
    // In a key group, the outermost layers that hold one try across every
    // copy made the key (a key made afresh per client try): copies under
    // it come only from the layers below, which alone bound them.
    std::size_t below = 0;
    std::string made_at;
    if (group.kind == GroupKind::key) {
        while (below < seen.size() && seen[below].size() == 1)
            ++below;
        if (below == seen.size()) below = 0; // no layer retried: nothing to bound
        if (below > 0)
            made_at = fmt::format("; the key was made at {} try {}", names[below - 1],
                                  *seen[below - 1].begin());
    }
    std::size_t retrying = 0, possible = 1;
    std::vector<std::string> factors, contributions;
    for (std::size_t layer = below; layer < seen.size(); ++layer) {
        if (seen[layer].empty()) continue;
        auto tries = static_cast<std::size_t>(*seen[layer].rbegin());
        auto bound = std::max(tries, static_cast<std::size_t>(most[layer]));
        if (seen[layer].size() > 1) ++retrying;
        possible *= bound;
        factors.push_back(fmt::format("{} ({})", bound, names[layer]));
        contributions.push_back(
            fmt::format("{} tried {} time{}", names[layer], tries, tries == 1 ? "" : "s"));
    }
    if (retrying == 0 || carrying.size() < 2) return;
    Evidence evidence{Cause::layered_retry, carrying, {}, 0, {}, {}, {}};
    for (std::size_t i = 1; i < carrying.size(); ++i) {
        const auto& before = attempts[group.records[carrying[i - 1]]];
        const auto& after = attempts[group.records[carrying[i]]];
        if (before.time && after.time) evidence.gaps.push_back(*after.time - *before.time);
    }
    evidence.detail = fmt::format("{} = up to {} copies of one intent, {} arrived: {}{}",
                                  fmt::join(factors, " x "), possible, carrying.size(),
                                  fmt::join(contributions, ", "), made_at);
    found.push_back(std::move(evidence));
}

} // namespace

Explanation explain(GroupKind kind, std::vector<std::size_t> members,
                    const std::vector<Attempt>& attempts, const ExplainOptions& options) {
    ArenaScope arena;
    Explanation group;
    group.kind = kind;
    // Time order; records without a time keep their input order, after.
    std::stable_sort(members.begin(), members.end(), [&](std::size_t left, std::size_t right) {
        const auto& a = attempts[left].time;
        const auto& b = attempts[right].time;
        if (a && b) return *a < *b;
        return a.has_value() && !b.has_value();
    });
    group.records = std::move(members);
    std::optional<Timestamp> previous;
    std::pmr::set<std::uint32_t> sources(scratch()), keys(scratch());
    std::pmr::set<std::uint64_t> payloads(scratch());
    for (auto index : group.records) {
        const auto& attempt = attempts[index];
        if (sources.insert(attempt.source).second) group.sources.push_back(attempt.source);
        payloads.insert(attempt.payload);
        keys.insert(attempt.key);
        if (!attempt.time) continue;
        if (!group.first) group.first = attempt.time;
        group.last = attempt.time;
        if (previous) group.gaps.push_back(*attempt.time - *previous);
        previous = attempt.time;
    }
    group.payloads = payloads.size();
    group.keys = keys.size();

    // Copies no sender made as an attempt (a replay, a changed body) are
    // named first, and no retry cause counts them.
    std::vector<Evidence> signed_copies;
    std::vector<bool> judged(group.records.size(), false);
    find_signed_copies(group, attempts, signed_copies, judged);
    find_retries_after_failure(group, attempts, judged, group.causes);
    find_retry_storms(group, attempts, judged, group.causes);
    find_races(group, attempts, options.race_window, group.causes);
    find_provider_retries(group, attempts, judged, group.causes);
    std::move(signed_copies.begin(), signed_copies.end(), std::back_inserter(group.causes));
    find_fan_out(group, attempts, options.fan_out_window, group.causes);
    find_layers(group, attempts, options.layer_names, options.layer_most, group.causes);
    if (kind == GroupKind::key) {
        find_expired(group, attempts, options.ttl, group.causes);
        // A copy changed after it was signed is tampered, not a second
        // intent under the key: its payload is not counted as one.
        auto intents =
            first_of_each(group, attempts, [](const Attempt& attempt) { return attempt.payload; });
        std::erase_if(intents, [&](std::size_t i) {
            return judged[i] && std::any_of(group.causes.begin(), group.causes.end(),
                                            [&](const Evidence& evidence) {
                                                return evidence.cause == Cause::tampered &&
                                                       std::count(evidence.records.begin(),
                                                                  evidence.records.end(), i);
                                            });
        });
        if (intents.size() > 1)
            group.causes.push_back({Cause::key_reuse, intents, {}, 0, {}, {}, {}});
    } else {
        find_regenerated(group, attempts, options.window, group.causes);
    }
    if (group.causes.empty()) {
        Evidence nothing{Cause::unexplained, {}, group.gaps, 0, {}, {}, {}};
        for (std::size_t i = 0; i < group.records.size(); ++i)
            nothing.records.push_back(i);
        group.causes.push_back(std::move(nothing));
    }
    return group;
}

} // namespace idem::audit
