#include "idem/store/store.hpp"

#include <doctest/doctest.h>
#include <filesystem>
#include <unistd.h>

using namespace idem;
using namespace idem::store;

namespace {

Timestamp at(long long seconds) {
    return Timestamp(std::chrono::seconds(seconds));
}

FingerprintClaim claim(std::uint8_t id, long long event_seconds, long long expires_seconds,
                       std::uint64_t line, Duration window = Duration(0)) {
    FingerprintClaim c;
    c.fingerprint[0] = id;
    c.event_time = at(event_seconds);
    c.expires_at = at(expires_seconds);
    c.window = window;
    c.source = "events.ndjson";
    c.line = line;
    return c;
}

struct TempStore {
    std::string path;
    TempStore() {
        path = (std::filesystem::temp_directory_path() /
                ("idem-claims-" + std::to_string(::getpid()) + ".db"))
                   .string();
        remove();
    }
    ~TempStore() { remove(); }
    void remove() {
        for (const char* suffix : {"", "-wal", "-shm"})
            std::filesystem::remove(path + suffix);
    }
};

// The same behaviour from every local store.
void check_claims(Store& store) {
    auto results = store.claim_fingerprints(
        "s", {claim(1, 100, 1000, 1), claim(2, 100, 1000, 2), claim(1, 110, 1000, 3)}, at(100));
    REQUIRE(results.size() == 3);
    CHECK(results[0].first);
    CHECK(results[1].first);
    CHECK_FALSE(results[2].first);
    CHECK(results[2].seen_count == 2);
    CHECK(results[2].first_line == 1);
    CHECK(results[2].first_source == "events.ndjson");
    CHECK(results[2].first_seen == at(100));
    store.commit();

    SUBCASE("scopes are apart") {
        CHECK(store.claim_fingerprints("other", {claim(1, 100, 1000, 9)}, at(100))[0].first);
    }
    SUBCASE("an expired fingerprint is claimed anew, and garbage collection removes it") {
        CHECK(store.claim_fingerprints("s", {claim(1, 200, 3000, 4)}, at(1000))[0].first);
        store.commit();
        CHECK(store.collect_garbage(at(1001)) == 1); // fingerprint 2 expired at 1000
    }
    SUBCASE("outside the window, a repeat starts a new first copy") {
        auto within = store.claim_fingerprints(
            "s", {claim(1, 150, 1000, 5, std::chrono::seconds(60))}, at(150));
        CHECK_FALSE(within[0].first);
        auto beyond = store.claim_fingerprints(
            "s", {claim(1, 161, 1000, 6, std::chrono::seconds(60))}, at(161));
        CHECK(beyond[0].first);
        CHECK(beyond[0].first_seen == at(161));
    }
}

} // namespace

TEST_CASE("fingerprint claims in the memory store") {
    auto store = open_store(parse_store_uri(":memory:"));
    check_claims(*store);
}

TEST_CASE("fingerprint claims in a SQLite file, remembered by the next process") {
    TempStore file;
    {
        auto store = open_store(parse_store_uri(file.path));
        check_claims(*store);
    }
    auto reopened = open_store(parse_store_uri(file.path));
    auto again = reopened->claim_fingerprints("s", {claim(1, 120, 1000, 7)}, at(120));
    CHECK_FALSE(again[0].first);
}

TEST_CASE("claims not committed are not remembered") {
    TempStore file;
    {
        auto store = open_store(parse_store_uri(file.path));
        CHECK(store->claim_fingerprints("s", {claim(9, 100, 1000, 1)}, at(100))[0].first);
        // no commit: as if the process died before its output was flushed
    }
    auto reopened = open_store(parse_store_uri(file.path));
    CHECK(reopened->claim_fingerprints("s", {claim(9, 100, 1000, 1)}, at(100))[0].first);
}
