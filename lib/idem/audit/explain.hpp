#pragma once
// Why a group of records happened more than once (docs/audit.md), as pure
// logic: given the records of one group (the same idempotency key, or the
// same business fingerprint), find the causes the evidence supports, each
// with the records and gaps that show it. No I/O, no formatting.

#include "idem/util/time.hpp"

#include <array>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::audit {

enum class Cause {
    retry_storm,
    concurrent,
    ttl_expired,
    key_reuse,
    key_regenerated,
    retried_after_failure,
    provider_retry,
    replayed_delivery,
    tampered,
    re_serialized,
    fan_out,
    layered_retry,
    unexplained
};

[[nodiscard]] std::string_view cause_name(Cause cause);
[[nodiscard]] std::optional<Cause> parse_cause(std::string_view name);
inline constexpr Cause k_all_causes[] = {
    Cause::retry_storm,    Cause::concurrent,        Cause::ttl_expired,
    Cause::key_reuse,      Cause::key_regenerated,   Cause::retried_after_failure,
    Cause::provider_retry, Cause::replayed_delivery, Cause::tampered,
    Cause::re_serialized,  Cause::fan_out,           Cause::layered_retry,
    Cause::unexplained};

// The webhook senders whose retry behaviour is published (docs/audit.md
// cites each): a delivery's provider, told by its headers or --provider.
enum class Provider : std::uint8_t { unknown, stripe, svix, shopify, github, slack, twilio };
[[nodiscard]] std::string_view provider_name(Provider provider);
[[nodiscard]] std::optional<Provider> parse_provider(std::string_view name);

// Which provider sent a captured delivery, from the headers only it sends;
// `header` looks a header up case-insensitively. Slack also numbers its
// retries (X-Slack-Retry-Num): `attempt` gets the attempt (retry + 1).
template <typename HeaderLookup>
Provider provider_of_headers(HeaderLookup header, std::uint8_t& attempt);

// Whether `provider` signs every attempt afresh, over a timestamp of its
// own (Stripe's t=, Svix's and Standard Webhooks' webhook-timestamp,
// Slack's X-Slack-Request-Timestamp): a retry then never carries an
// earlier attempt's signed time.
[[nodiscard]] bool signs_each_attempt(Provider provider);

// What verify said of a copy (--verdicts), as far as causes go: its
// signature matched, did not match the bytes, or its time (or message id)
// was one seen before.
enum class SignatureVerdict : std::uint8_t { unknown, valid, mismatch, stale, invalid };
[[nodiscard]] SignatureVerdict classify_verdict(bool valid, std::string_view reason);

// The signature a captured copy carried: what tells a provider's fresh
// attempt from an earlier delivery sent again (the same signing) or
// altered on the way (the same signing over other bytes).
struct SignedCopy {
    std::int64_t signed_at = 0;  // the signature's own timestamp, seconds; 0: none
    std::uint64_t signature = 0; // digest of the signature header; 0: unsigned
    std::uint64_t body = 0;      // digest of the body's bytes as received
    std::uint64_t canonical = 0; // digest of the body's canonical JSON, whole; 0: not JSON
    SignatureVerdict verdict = SignatureVerdict::unknown;
};

// The headers that carry `provider`'s signature and its signed time.
struct SigningHeaders {
    std::optional<std::string_view> signature;
    std::optional<std::string_view> signed_at; // the time's text
};
template <typename HeaderLookup>
SigningHeaders signing_headers(HeaderLookup header, Provider provider);
// A signed time's text as seconds: "1796029400", or Stripe's whole header
// ("t=1796029400,v1=..."); 0 when it holds none.
[[nodiscard]] std::int64_t signed_seconds(std::string_view text);

// Up to this many nested retry layers (--attempt-field, outermost first).
inline constexpr std::size_t k_max_layers = 4;

// How one copy was delivered: the provider, its own attempt counter, where
// it went (endpoint and subscription, interned like sources; 0 when
// unknown) and each retry layer's attempt counter (0 when absent).
struct DeliveryTrace {
    Provider provider = Provider::unknown;
    std::uint8_t provider_attempt = 0;
    std::uint32_t endpoint = 0;
    std::uint32_t subscription = 0;
    std::array<std::uint8_t, k_max_layers> layers{};
    SignedCopy signed_copy;
};

// What the receiver answered a record, when the evidence says: an HTTP
// status, k_no_answer (a dropped connection, a timeout), or 0 (unknown).
inline constexpr std::uint16_t k_no_answer = 1;
// Whether such an answer asks the sender to try again: 5xx, 408, 429, none.
[[nodiscard]] bool is_failed_answer(std::uint16_t status);

// One record as audit sees it. Strings are interned by the caller: ids
// compare as the values do; 0 means the field was absent.
// Where a record came from, compactly: formatted only when shown.
struct RecordPosition {
    std::uint32_t input = 0;  // index into the run's inputs
    bool row = false;         // a query's row number, not a line
    std::uint64_t number = 0; // line, or row
};

struct Attempt {
    std::uint32_t key = 0;
    std::uint32_t fingerprint = 0;
    std::uint32_t source = 0;
    std::uint64_t payload = 0; // the first 64 bits of the payload's SHA-256
    std::optional<Timestamp> time;
    std::uint16_t status = 0; // what the receiver answered it, when known
    DeliveryTrace trace;
};

// A key group: records sharing one idempotency key. A fingerprint group:
// records sharing one business intent, under more than one key.
enum class GroupKind { key, fingerprint };

struct ExplainOptions {
    Duration race_window = std::chrono::seconds(1);
    Duration ttl = std::chrono::hours(24);
    Duration window = std::chrono::hours(24);
    // Copies of one event to several endpoints or subscriptions this close
    // are one fan-out.
    Duration fan_out_window = std::chrono::minutes(1);
    // The retry layers' names (--attempt-field paths), outermost first.
    std::vector<std::string> layer_names;
    // Each layer's highest try over the whole log (0: unknown), which
    // bounds a group's copies beside the tries the group itself shows.
    std::array<std::uint8_t, k_max_layers> layer_most{};
};

struct Evidence {
    Cause cause = Cause::unexplained;
    // The records that show it (indexes into the group's records), and for
    // retry-storm, concurrent, ttl-expired and retried-after-failure, the
    // gaps between them.
    std::vector<std::size_t> records;
    std::vector<Duration> gaps;
    std::uint32_t source = 0; // retry-storm: whose attempts
    // provider-retry: each record's attempt number in its provider's
    // schedule (0: not known), beside `records`.
    std::vector<std::uint16_t> attempt_numbers;
    // provider-retry and layered-retry: the evidence as a sentence;
    // fan-out: what differs ("endpoint" or the subscription's field).
    std::string detail;
    // replayed-delivery, tampered, re-serialized: beside each of `records`
    // (the copies judged), the earlier copy whose signing it carries, or
    // k_no_original when verify's verdict alone judged it.
    std::vector<std::size_t> originals;
};
inline constexpr std::size_t k_no_original = 0xFFFFFFFF;

struct Explanation {
    GroupKind kind = GroupKind::key;
    std::vector<std::size_t> records; // indexes into the attempts, in time order
    std::optional<Timestamp> first, last;
    std::vector<Duration> gaps;         // between consecutive timed records
    std::vector<std::uint32_t> sources; // distinct, in order of appearance
    std::size_t payloads = 0;           // distinct payloads
    std::size_t keys = 0;               // distinct keys
    std::vector<Evidence> causes;       // never empty: unexplained when nothing fits
};

// `members` index `attempts`; a group has two records or more.
[[nodiscard]] Explanation explain(GroupKind kind, std::vector<std::size_t> members,
                                  const std::vector<Attempt>& attempts,
                                  const ExplainOptions& options);

template <typename HeaderLookup>
Provider provider_of_headers(HeaderLookup header, std::uint8_t& attempt) {
    attempt = 0;
    if (header("Stripe-Signature")) return Provider::stripe;
    if (header("svix-id") || header("webhook-id")) return Provider::svix;
    if (header("X-Shopify-Hmac-Sha256") || header("X-Shopify-Webhook-Id")) return Provider::shopify;
    if (header("X-GitHub-Delivery")) return Provider::github;
    if (header("X-Slack-Signature") || header("X-Slack-Request-Timestamp")) {
        if (auto retry = header("X-Slack-Retry-Num")) {
            // Slack retries 3 times; a count past 100 is no count (and
            // would not fit the attempt's byte).
            std::string_view text = *retry;
            unsigned number = 0;
            auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), number);
            if (error == std::errc() && end == text.data() + text.size() && number > 0 &&
                number <= 100)
                attempt = static_cast<std::uint8_t>(number + 1);
        } else {
            attempt = 1; // Slack numbers only its retries
        }
        return Provider::slack;
    }
    if (header("X-Twilio-Signature")) return Provider::twilio;
    return Provider::unknown;
}

template <typename HeaderLookup>
SigningHeaders signing_headers(HeaderLookup header, Provider provider) {
    auto first_of = [&](std::initializer_list<std::string_view> names) {
        for (auto name : names)
            if (auto value = header(name)) return value;
        return std::optional<std::string_view>();
    };
    switch (provider) {
    case Provider::stripe: {
        auto value = header("Stripe-Signature");
        return {value, value};
    }
    case Provider::svix:
        return {first_of({"svix-signature", "webhook-signature"}),
                first_of({"svix-timestamp", "webhook-timestamp"})};
    case Provider::slack:
        return {header("X-Slack-Signature"), header("X-Slack-Request-Timestamp")};
    case Provider::github:
        return {first_of({"X-Hub-Signature-256", "X-Hub-Signature"}), std::nullopt};
    case Provider::shopify:
        return {header("X-Shopify-Hmac-Sha256"), std::nullopt};
    case Provider::twilio:
        return {header("X-Twilio-Signature"), std::nullopt};
    case Provider::unknown:
        break;
    }
    return {};
}

} // namespace idem::audit
