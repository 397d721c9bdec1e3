#include "idem/store/checkpoints.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::store;

namespace {
Timestamp at_minute(int minutes) {
    return Timestamp(std::chrono::minutes(minutes));
}
NonceEntry kept_at(int minutes, std::uint64_t line) {
    return {at_minute(minutes), "capture.ndjson", line};
}
} // namespace

TEST_CASE("the nonce rule: judged on received_at, never a replay of itself") {
    const Duration window = std::chrono::hours(72);
    // GitHub's Redeliver: the same delivery id at 08:00, 08:01 and 09:00.
    auto first = judge_nonce(std::nullopt, {at_minute(480), "capture.ndjson", 1}, window);
    CHECK(first.claim.verdict == NonceVerdict::fresh);
    CHECK(first.store);
    auto soon = judge_nonce(kept_at(480, 1), {at_minute(481), "capture.ndjson", 2}, window);
    CHECK(soon.claim.verdict == NonceVerdict::replay);
    CHECK(soon.claim.first_seen == at_minute(480));
    CHECK_FALSE(soon.store);
    CHECK(
        judge_nonce(kept_at(480, 1), {at_minute(540), "capture.ndjson", 3}, window).claim.verdict ==
        NonceVerdict::replay);
    // The same record checked again, by any later run.
    auto itself = judge_nonce(kept_at(480, 1), {at_minute(480), "capture.ndjson", 1}, window);
    CHECK(itself.claim.verdict == NonceVerdict::same_record);
    CHECK_FALSE(itself.store);
    // The same position of another input (another stdin) received later: a replay.
    CHECK(
        judge_nonce(kept_at(480, 1), {at_minute(490), "capture.ndjson", 1}, window).claim.verdict ==
        NonceVerdict::replay);
    // Read out of order: the earlier delivery is the original, kept instead.
    auto earlier = judge_nonce(kept_at(540, 3), {at_minute(480), "capture.ndjson", 1}, window);
    CHECK(earlier.claim.verdict == NonceVerdict::fresh);
    CHECK(earlier.store);
    // Beyond the window either way: a delivery of another epoch.
    auto later = judge_nonce(kept_at(0, 1), {at_minute(72 * 60 + 1), "next.ndjson", 1}, window);
    CHECK(later.claim.verdict == NonceVerdict::fresh);
    CHECK(later.store);
    auto long_before =
        judge_nonce(kept_at(72 * 60 + 1, 1), {at_minute(0), "old.ndjson", 1}, window);
    CHECK(long_before.claim.verdict == NonceVerdict::fresh);
    CHECK_FALSE(long_before.store);
}
