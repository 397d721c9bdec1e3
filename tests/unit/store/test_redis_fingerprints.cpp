// How the Redis store keeps dedup's first copies, and what a claim does
// about one it meets (store/redis/redis_fingerprints.hpp).

#include "idem/store/redis/redis_cluster.hpp"
#include "idem/store/redis/redis_fingerprints.hpp"

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::store;
using detail::MetFirstCopy;

namespace {

FingerprintClaim claim_at(long long event_us, std::string_view source, std::uint64_t line,
                          Duration window = Duration(0)) {
    FingerprintClaim claim;
    claim.event_time = Timestamp(Duration(event_us));
    claim.source = source;
    claim.line = line;
    claim.window = window;
    return claim;
}

} // namespace

TEST_CASE("a first copy's value reads back whole, a source with spaces and colons too") {
    detail::FirstCopy first{-1'500'000,
                            42,
                            7,
                            1'800'000'000'000,
                            "host:123:1700000000000000",
                            "dir with space/a:b.log"};
    auto value = detail::encode_first_copy(first);
    CHECK(value == "-1500000 42 7 1800000000000 host:123:1700000000000000 dir with space/a:b.log");
    auto decoded = detail::decode_first_copy(value);
    REQUIRE(decoded);
    CHECK(decoded->first_seen_us == -1'500'000);
    CHECK(decoded->line == 42);
    CHECK(decoded->batch == 7);
    CHECK(decoded->expires_ms == 1'800'000'000'000);
    CHECK(decoded->owner == first.owner);
    CHECK(decoded->source == first.source);
    // An empty source (a record from nowhere) still reads.
    auto bare = detail::decode_first_copy("5 1 1 0 me ");
    REQUIRE(bare);
    CHECK(bare->source.empty());
}

TEST_CASE("a damaged first copy is refused, not read as a first copy of line 0") {
    for (std::string_view damaged :
         {"", "1", "1 2 3 4", "1 2 3 4 ", "1 2 3 4 owner", "x 2 3 4 owner src",
          "1 2 -3 4 owner src", "1 2 3 -4 owner src", "1  2 3 4 owner src", "1 2 3 4  src",
          "1 2 3 owner src"})
        CHECK_MESSAGE(!detail::decode_first_copy(damaged), damaged);
}

TEST_CASE("evidence of a repeat reads back from the right") {
    auto entry = detail::encode_evidence("logs/a b:c.ndjson", 9, 1'000'001);
    CHECK(entry == "logs/a b:c.ndjson:9 1000001");
    FingerprintRecord record;
    REQUIRE(detail::decode_evidence(entry, record));
    CHECK(record.source == "logs/a b:c.ndjson");
    CHECK(record.line == 9);
    CHECK(record.event_time == Timestamp(Duration(1'000'001)));
    for (std::string_view damaged : {"", "src 12", "src:x 12", "src:1 1x", "src:1 "})
        CHECK_MESSAGE(!detail::decode_evidence(damaged, record), damaged);
}

TEST_CASE("keys: a fingerprint, its evidence and its owner's confirmations") {
    FingerprintBytes fingerprint{};
    fingerprint[0] = 0xab;
    fingerprint[fingerprint.size() - 1] = 0x01;
    auto key = detail::fingerprint_key("orders", fingerprint);
    CHECK(key.starts_with("idem:fp:{orders:ab00"));
    CHECK(key.ends_with("01}"));
    // Each first copy keeps its repeats in a list named after it, so a
    // repeat counted for one never lands in a later first copy's; a first
    // copy an earlier idem confirmed keeps the list that idem shared.
    detail::FirstCopy first{1'000, 3, 5, 0, "h:1:2", "in.ndjson"};
    auto evidence = detail::evidence_key(key, first);
    CHECK(evidence == "idem:dups:" + key.substr(8) + ":1000:3:5:h:1:2");
    detail::FirstCopy later = first;
    later.first_seen_us = 9'000;
    CHECK(detail::evidence_key(key, later) != evidence);
    // Past the repeats it keeps, the ones a list dropped are counted beside it.
    CHECK(detail::not_kept_key(key, first) == "idem:notkept:" + key.substr(8) + ":1000:3:5:h:1:2");
    CHECK(detail::key_slot(detail::not_kept_key(key, first)) == detail::key_slot(key));
    detail::FirstCopy settled{1'000, 3, 0, 0, detail::k_no_owner, "in.ndjson"};
    CHECK(detail::evidence_key(key, settled) == detail::shared_evidence_key(key));
    CHECK(detail::not_kept_key(key, settled) == "idem:notkept:" + key.substr(8));
    CHECK(detail::shared_evidence_key(key) == "idem:dups:" + key.substr(8));
    // Every key of a fingerprint is in one Redis Cluster slot.
    CHECK(detail::key_slot(key) == detail::key_slot(evidence));
    CHECK(detail::key_slot(key) == detail::key_slot(detail::shared_evidence_key(key)));
    FingerprintBytes back{};
    REQUIRE(detail::fingerprint_of(key, back));
    CHECK(back == fingerprint);
    CHECK_FALSE(detail::fingerprint_of("idem:fp:{orders:zz}", back));
    CHECK_FALSE(detail::fingerprint_of(key.substr(0, key.size() - 1), back));
    CHECK(detail::confirmed_key("h:1:2") == "idem:confirmed:h:1:2");
}

TEST_CASE("a claim meeting a first copy: a repeat, its own retry, new past the window, or ask") {
    const std::string me = "me:1:1";
    const std::string other = "other:2:2";
    detail::FirstCopy mine{1'000, 3, 5, 0, me, "in.ndjson"};

    // This process's own claim of this very record, sent again after a lost
    // connection, is still the first copy, never a repeat of itself.
    CHECK(detail::judge_met_first_copy(mine, claim_at(1'000, "in.ndjson", 3), me, 5, 0) ==
          MetFirstCopy::mine_again);
    // Another record of this process, or this record in a later batch: a repeat.
    CHECK(detail::judge_met_first_copy(mine, claim_at(2'000, "in.ndjson", 4), me, 5, 0) ==
          MetFirstCopy::repeat);
    CHECK(detail::judge_met_first_copy(mine, claim_at(1'000, "in.ndjson", 3), me, 6, 0) ==
          MetFirstCopy::repeat);

    // Another owner's batch: a repeat once that batch is confirmed, else ask.
    detail::FirstCopy theirs{1'000, 3, 5, 0, other, "in.ndjson"};
    CHECK(detail::judge_met_first_copy(theirs, claim_at(1'000, "in.ndjson", 3), me, 5, 5) ==
          MetFirstCopy::repeat);
    CHECK(detail::judge_met_first_copy(theirs, claim_at(1'000, "in.ndjson", 3), me, 5, 4) ==
          MetFirstCopy::ask_owner);
    // A first copy an earlier idem had confirmed has nobody to ask.
    detail::FirstCopy settled{1'000, 3, 0, 0, detail::k_no_owner, "in.ndjson"};
    CHECK(detail::judge_met_first_copy(settled, claim_at(9'000, "x", 1), me, 1, 0) ==
          MetFirstCopy::repeat);

    // Further than the window from the first copy: new, whoever held it;
    // at the window's edge still a repeat; no window: always a repeat.
    auto window = Duration(5'000);
    CHECK(detail::judge_met_first_copy(theirs, claim_at(6'001, "x", 1, window), me, 1, 0) ==
          MetFirstCopy::claim_anew);
    CHECK(detail::judge_met_first_copy(theirs, claim_at(6'000, "x", 1, window), me, 1, 5) ==
          MetFirstCopy::repeat);
    CHECK(detail::judge_met_first_copy(theirs, claim_at(999'999, "x", 1), me, 1, 5) ==
          MetFirstCopy::repeat);
}
