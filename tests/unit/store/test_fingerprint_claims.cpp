#include "idem/store/checkpoints.hpp"
#include "idem/store/detail/fingerprint_table.hpp"
#include "idem/store/fingerprints.hpp"
#include "idem/store/nonces.hpp"
#include "idem/store/replay_ledger.hpp"
#include "idem/store/sequencer_state.hpp"
#include "idem/store/store.hpp"
#include "idem/store/verdicts.hpp"
#include "support/instants.hpp"

#include "temp_store.hpp"
#include <cstring>

#include <doctest/doctest.h>

using namespace idem;
using namespace idem::store;
using idem::test::TempStore;

namespace {

FingerprintClaim claim(std::uint8_t id, long long event_seconds, long long expires_seconds,
                       std::uint64_t line, Duration window = Duration(0)) {
    FingerprintClaim c;
    c.fingerprint[0] = id;
    c.event_time = test::unix_seconds(event_seconds);
    c.expires_at = test::unix_seconds(expires_seconds);
    c.window = window;
    c.source = "events.ndjson";
    c.line = line;
    return c;
}

// The same behaviour from every local store.
void check_claims(Store& store) {
    auto results = store.fingerprints().claim_fingerprints(
        "s", {claim(1, 100, 1000, 1), claim(2, 100, 1000, 2), claim(1, 110, 1000, 3)},
        test::unix_seconds(100));
    REQUIRE(results.size() == 3);
    CHECK(results[0].first);
    CHECK(results[1].first);
    CHECK_FALSE(results[2].first);
    CHECK(results[2].seen_count == 2);
    CHECK(results[2].first_line == 1);
    CHECK(results[2].first_source == "events.ndjson");
    CHECK(results[2].first_seen == test::unix_seconds(100));
    store.commit();

    SUBCASE("scopes are apart") {
        CHECK(store.fingerprints()
                  .claim_fingerprints("other", {claim(1, 100, 1000, 9)}, test::unix_seconds(100))[0]
                  .first);
    }
    SUBCASE("an expired fingerprint is claimed anew, and garbage collection removes it") {
        CHECK(store.fingerprints()
                  .claim_fingerprints("s", {claim(1, 200, 3000, 4)}, test::unix_seconds(1000))[0]
                  .first);
        store.commit();
        CHECK(store.collect_garbage(test::unix_seconds(1001)) ==
              1); // fingerprint 2 expired at 1000
    }
    SUBCASE("outside the window, a repeat starts a new first copy") {
        auto within = store.fingerprints().claim_fingerprints(
            "s", {claim(1, 150, 1000, 5, std::chrono::seconds(60))}, test::unix_seconds(150));
        CHECK_FALSE(within[0].first);
        auto beyond = store.fingerprints().claim_fingerprints(
            "s", {claim(1, 161, 1000, 6, std::chrono::seconds(60))}, test::unix_seconds(161));
        CHECK(beyond[0].first);
        CHECK(beyond[0].first_seen == test::unix_seconds(161));
    }
}

} // namespace

TEST_CASE("fingerprint claims in the memory store") {
    auto store = open_store(parse_store_uri(":memory:"));
    check_claims(*store);
}

TEST_CASE("fingerprint claims in a SQLite file, remembered by the next process") {
    TempStore file("claims");
    {
        auto store = open_store(parse_store_uri(file.path));
        check_claims(*store);
    }
    auto reopened = open_store(parse_store_uri(file.path));
    auto again = reopened->fingerprints().claim_fingerprints("s", {claim(1, 120, 1000, 7)},
                                                             test::unix_seconds(120));
    CHECK_FALSE(again[0].first);
}

TEST_CASE("claims not committed are not remembered") {
    TempStore file("claims");
    {
        auto store = open_store(parse_store_uri(file.path));
        CHECK(store->fingerprints()
                  .claim_fingerprints("s", {claim(9, 100, 1000, 1)}, test::unix_seconds(100))[0]
                  .first);
        // no commit: as if the process died before its output was flushed
    }
    auto reopened = open_store(parse_store_uri(file.path));
    CHECK(reopened->fingerprints()
              .claim_fingerprints("s", {claim(9, 100, 1000, 1)}, test::unix_seconds(100))[0]
              .first);
}

TEST_CASE("a released first copy is claimable again, in this process and in others") {
    auto check_release = [](Store& mine, Store& other) {
        CHECK(mine.fingerprints()
                  .claim_fingerprints("s", {claim(9, 10, 1000, 1)}, test::unix_seconds(10))[0]
                  .first);
        mine.commit();
        CHECK_FALSE(other.fingerprints()
                        .claim_fingerprints("s", {claim(9, 11, 1000, 2)}, test::unix_seconds(11))[0]
                        .first);
        other.commit();
        mine.fingerprints().release_fingerprint("s", claim(9, 0, 0, 0).fingerprint,
                                                test::unix_seconds(12));
        mine.commit();
        CHECK(other.fingerprints()
                  .claim_fingerprints("s", {claim(9, 13, 1000, 3)}, test::unix_seconds(13))[0]
                  .first);
        other.commit();
        CHECK_FALSE(mine.fingerprints()
                        .claim_fingerprints("s", {claim(9, 14, 1000, 4)}, test::unix_seconds(14))[0]
                        .first);
        mine.commit();
    };
    auto memory = open_store(parse_store_uri(":memory:"));
    check_release(*memory, *memory);
    TempStore file("claims");
    auto first = open_store(parse_store_uri(file.path));
    auto second = open_store(parse_store_uri(file.path));
    check_release(*first, *second);
    // The release is not evidence: audit sees two first copies and two repeats.
    int records = 0;
    first->evidence().for_each_fingerprint_record("s",
                                                  [&](const FingerprintRecord&) { ++records; });
    CHECK(records == 4);
}

TEST_CASE("the table keeps every entry through growth, a reservation and expiry") {
    detail::FingerprintTable table;
    CHECK(table.remove_expired(test::unix_seconds(0)) == 0); // nothing allocated yet
    auto key = [](std::uint32_t n) {
        FingerprintBytes bytes{};
        // Low bytes index the table: spread them, and collide some on purpose.
        std::memcpy(bytes.data(), &n, sizeof n);
        bytes[8] = static_cast<std::uint8_t>(n % 7);
        return bytes;
    };
    constexpr std::uint32_t k_entries = 200'000; // past the first capacity: it grows
    for (std::uint32_t n = 0; n < k_entries; ++n) {
        auto [entry, inserted] = table.find_or_insert(key(n));
        REQUIRE(inserted);
        *entry = {test::unix_seconds(n), test::unix_seconds(n % 2 == 0 ? 100 : 1'000'000), 1, 0, n};
    }
    table.reserve(1'000'000);
    CHECK(table.size() == k_entries);
    for (std::uint32_t n = 0; n < k_entries; n += 997) {
        REQUIRE(table.find(key(n)) != nullptr);
        CHECK(table.find(key(n))->first_line == n);
    }
    CHECK(table.remove_expired(test::unix_seconds(500)) ==
          k_entries / 2); // the even ones expired at 100
    CHECK(table.find(key(2)) == nullptr);
    CHECK(table.find(key(3))->first_line == 3);
    CHECK_FALSE(table.find_or_insert(key(3)).second);
}

TEST_CASE("keys that share the index's bytes and the slot's tag stay apart") {
    detail::FingerprintTable table;
    // Bytes 0..7 pick the slot and 8..11 are its tag: these keys differ only
    // after both, so every probe meets the others' tags and must compare keys.
    auto key = [](std::uint8_t last) {
        FingerprintBytes bytes{};
        bytes.fill(0xab);
        bytes[15] = last;
        return bytes;
    };
    for (std::uint8_t n = 0; n < 50; ++n) {
        auto [entry, inserted] = table.find_or_insert(key(n));
        REQUIRE(inserted);
        entry->first_line = n;
        entry->seen_count = 1;
    }
    for (std::uint8_t n = 0; n < 50; ++n) {
        auto [entry, inserted] = table.find_or_insert(key(n));
        CHECK_FALSE(inserted);
        CHECK(entry->first_line == n);
    }
    CHECK(table.find(key(50)) == nullptr);
    CHECK(table.size() == 50);
}
