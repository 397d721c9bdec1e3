// How the Redis store encodes what it keeps in hash fields: every value
// reads back whole, whatever bytes it holds, and damage is refused.

#include "idem/store/redis/redis_held_copies.hpp"
#include "idem/store/redis/redis_replay.hpp"
#include "idem/store/redis/redis_verdicts.hpp"
#include "support/instants.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace idem;
using namespace idem::store;

namespace {} // namespace

TEST_CASE("a verdict's Redis encoding reads back, whatever its texts hold") {
    VerdictRecord verdict{"dir with space/cap:ture.ndjson",
                          42,
                          false,
                          "github",
                          "id with\nnewline",
                          "bad signature: \"x\" 1 2",
                          test::unix_seconds(7)};
    auto decoded =
        detail::decode_verdict(detail::verdict_field(verdict), detail::encode_verdict(verdict));
    REQUIRE(decoded);
    CHECK(decoded->source == verdict.source);
    CHECK(decoded->line == 42);
    CHECK_FALSE(decoded->valid);
    CHECK(decoded->scheme == "github");
    CHECK(decoded->message_id == verdict.message_id);
    CHECK(decoded->reason == verdict.reason);
    CHECK(decoded->checked_at == test::unix_seconds(7));
    CHECK_FALSE(detail::decode_verdict("x", "1 2 3 4\nab"));
    CHECK_FALSE(detail::decode_verdict("1 f", "1 2 30 4\nab"));
}

TEST_CASE("a held copy's Redis encoding reads back, whatever its source and record hold") {
    HeldCopyRow row;
    row.id = 17;
    for (std::size_t i = 0; i < row.fingerprint.size(); ++i)
        row.fingerprint[i] = static_cast<std::uint8_t>(i == 3 ? '\n' : 250 - i);
    row.source = "dir with space/\ncap 12 34.ndjson";
    row.line = 9;
    row.event_time = test::unix_seconds(-5);
    row.bytes = std::string("{\"id\":1}\r\0x", 11);
    auto decoded = detail::decode_held_copy("17", detail::encode_held_copy(row));
    REQUIRE(decoded);
    CHECK(decoded->id == 17);
    CHECK(decoded->fingerprint == row.fingerprint);
    CHECK(decoded->source == row.source);
    CHECK(decoded->line == 9);
    CHECK(decoded->event_time == test::unix_seconds(-5));
    CHECK(decoded->bytes == row.bytes);
    CHECK_FALSE(detail::decode_held_copy("x", detail::encode_held_copy(row)));
    CHECK_FALSE(detail::decode_held_copy("17", "9 1 400\nshort"));
    CHECK_FALSE(detail::decode_held_copy("17", "9 1\nabc"));
}

TEST_CASE("a copy an older idem held as a reorder row reads as a held copy") {
    HeldRecordRow legacy;
    legacy.id = 4;
    legacy.partition = "000102030405060708090a0b0c0d0e0f logs/a b.ndjson";
    legacy.key = {test::unix_seconds(30).time_since_epoch().count(), 12};
    legacy.arrival = test::unix_seconds(30);
    legacy.bytes = "{\"id\":\"x\"}";
    auto row = detail::held_copy_of_legacy(legacy);
    REQUIRE(row);
    CHECK(row->id == 4);
    CHECK(row->fingerprint[15] == 15);
    CHECK(row->source == "logs/a b.ndjson");
    CHECK(row->line == 12);
    CHECK(row->event_time == test::unix_seconds(30));
    CHECK(row->bytes == legacy.bytes);
    CHECK(detail::legacy_held_copies_scope("dedup x /o") == "dedup held dedup x /o");
    legacy.partition = "nothex logs/a.ndjson";
    CHECK_FALSE(detail::held_copy_of_legacy(legacy));
}

TEST_CASE("a replay ledger entry reads back, whatever bytes its response head holds") {
    ReplayEntry entry;
    entry.key = "evt 1:{x}";
    entry.state = ReplayState::failed;
    entry.owner = "host:4242:1700000000000000";
    entry.lease_until = test::unix_seconds(1'800'000'000);
    entry.attempts = 3;
    entry.status = 503;
    entry.latency_ms = -1;
    entry.permanent = true;
    entry.error = "http 503: 12:34 busy";
    entry.response_digest = "ab12";
    entry.response_head = "HTTP/1.1 503\r\n";
    entry.response_head += '\0';
    entry.response_head += " 9:x 1 2";
    entry.updated_at = test::unix_seconds(7);
    auto text = detail::encode_replay_entry(entry);
    auto decoded = detail::decode_replay_entry(entry.key, text);
    REQUIRE(decoded);
    CHECK(decoded->key == entry.key);
    CHECK(decoded->state == ReplayState::failed);
    CHECK(decoded->owner == entry.owner);
    CHECK(decoded->lease_until == entry.lease_until);
    CHECK(decoded->attempts == 3);
    CHECK(decoded->status == 503);
    CHECK(decoded->latency_ms == -1);
    CHECK(decoded->permanent);
    CHECK(decoded->error == entry.error);
    CHECK(decoded->response_digest == "ab12");
    CHECK(decoded->response_head == entry.response_head);
    CHECK(decoded->updated_at == entry.updated_at);
    // Damage is refused, not read as an entry: cut short, trailing bytes,
    // a state no release writes.
    CHECK_FALSE(detail::decode_replay_entry("k", text.substr(0, text.size() - 1)));
    CHECK_FALSE(detail::decode_replay_entry("k", text + "x"));
    CHECK_FALSE(detail::decode_replay_entry("k", "7" + text.substr(1)));
    CHECK_FALSE(detail::decode_replay_entry("k", ""));
}
