#pragma once
// Internal to audit: what a worker reads from one line (run.cpp interns
// it on the ordered stage), without an allocation per record.

#include "idem/audit/run.hpp"
#include "idem/record/key.hpp"
#include "idem/record/parser.hpp"
#include "idem/run/input.hpp"
#include "idem/util/huge_pages.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace idem::audit::detail {

// What a worker read from one line; the ordered stage interns it.
struct Reading {
    io::BlockLine line;
    bool parsed = true;
    bool outside_range = false; // --since/--until: counted by the run frame
    std::uint64_t column = 0;
    std::string message; // why it was not parsed
    // Encoded values in BlockReadings::texts; empty: absent. No allocation
    // per record: a worker reads a block of tens of thousands.
    struct Span {
        std::uint32_t at = 0, size = 0;
    } key, fingerprint, source, endpoint, subscription;
    std::optional<Timestamp> time;
    Provider provider = Provider::unknown;
    std::uint8_t provider_attempt = 0;
    std::array<std::uint8_t, k_max_layers> layers{};
    bool route_found = false;                            // --route-field had a value
    std::array<Span, k_max_what_if_keys> what_if_keys{}; // --what-if key=PATHS
    std::uint64_t payload = 0; // 0: none (a body that is not JSON, a missing --payload field)
    std::uint16_t status = 0;  // what the receiver answered (explain.hpp), 0: unknown
    SignedCopy signed_copy;    // a capture's signature and body digests
};

struct BlockReadings {
    HugeVector<Reading> outcomes; // a few MiB per block: util/huge_pages.hpp
    std::string texts;
    std::uint64_t lines = 0;

    void clear() {
        outcomes.clear();
        texts.clear();
        lines = 0;
    }
};

struct WorkerState {
    record::RecordParser parser;
    record::KeySpec payload;
    record::IgnoredPaths payload_ignored; // payload.ignore_paths, made ready once
    record::IgnoredPaths nothing_ignored; // a signed body's JSON, whole
    std::string encoded;                  // --payload values, encoded, reused from record to record
    explicit WorkerState(record::KeySpec spec)
        : payload(std::move(spec)), payload_ignored(payload.ignore_paths) {}
};

// A key, a fingerprint, a source, an endpoint or a subscription longer than
// this is kept by digest (docs/audit.md, "Budgets"): its first
// k_kept_text_prefix_bytes and "… [cut: N bytes, sha256 HEX]", so groups
// and reports never grow with what one value holds, and two values
// still differ exactly when they did.
inline constexpr std::uint32_t k_max_kept_text_bytes = 4096;
inline constexpr std::uint32_t k_kept_text_prefix_bytes = 256;

// `span`, the last text appended to `texts`, cut to the bound when longer.
[[nodiscard]] Reading::Span within_text_bound(std::string& texts, Reading::Span span);

inline std::string_view text_of(const std::string& texts, Reading::Span span) {
    return std::string_view(texts).substr(span.at, span.size);
}

// One line, parsed and read into `reading` (its texts appended to `texts`).
void read_line(const io::BlockLine& line, Reading& reading, std::string& texts, WorkerState& state,
               const AuditRunOptions& options);

// Every line of `block`, on a worker thread.
void read_block(const run::InputBlock& block, WorkerState& state, const AuditRunOptions& options,
                BlockReadings& result);

} // namespace idem::audit::detail
