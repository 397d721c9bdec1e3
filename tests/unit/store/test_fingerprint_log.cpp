// The SQLite store's fingerprint log (schema v10): its index in memory
// (FingerprintSlots), the index it saves for the next process (whole, or
// as deltas: schema v11), repeats kept
// as evidence up to a bound, and seqs that are never given twice.

#include "idem/store/fingerprints.hpp"
#include "idem/store/sqlite/fingerprint_slots.hpp"
#include "idem/store/sqlite/saved_slots_file.hpp"
#include "idem/store/sqlite/sqlite_fingerprints.hpp"
#include "idem/store/store.hpp"
#include "support/instants.hpp"

#include "temp_store.hpp"
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>

#include <doctest/doctest.h>
#include <map>
#include <sqlite3.h>

using namespace idem;
using namespace idem::store;
using idem::test::TempStore;

namespace {

FingerprintBytes key(std::uint32_t n) {
    FingerprintBytes bytes{};
    // The first 32 bits are what the slots keep: spread them.
    auto spread = n * 2654435761U;
    std::memcpy(bytes.data(), &spread, sizeof spread);
    std::memcpy(bytes.data() + 4, &n, sizeof n);
    return bytes;
}

FingerprintClaim claim_of(const FingerprintBytes& fingerprint, long long seconds,
                          std::uint64_t line, long long expires = 1'000'000) {
    FingerprintClaim c;
    c.fingerprint = fingerprint;
    c.event_time = test::unix_seconds(seconds);
    c.expires_at = test::unix_seconds(expires);
    c.source = "events.ndjson";
    c.line = line;
    return c;
}

long long count(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    sqlite3_stmt* statement = nullptr;
    REQUIRE(sqlite3_prepare_v2(db, sql, -1, &statement, nullptr) == SQLITE_OK);
    long long value =
        sqlite3_step(statement) == SQLITE_ROW ? sqlite3_column_int64(statement, 0) : -1;
    sqlite3_finalize(statement);
    sqlite3_close(db);
    return value;
}

void execute(const std::string& path, const char* sql) {
    sqlite3* db = nullptr;
    REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
    REQUIRE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr) == SQLITE_OK);
    sqlite3_close(db);
}

// Claims key(from) .. key(to - 1) at `seconds` in scope "s" of a store
// opened for it (a process of its own), commits, and closes it (which may
// save the index). Returns how many were first copies.
std::size_t claim_in_a_new_process(const std::string& path, std::uint32_t from, std::uint32_t to,
                                   long long seconds, long long expires = 1'000'000) {
    auto store = open_store(parse_store_uri(path));
    std::vector<FingerprintClaim> claims;
    for (std::uint32_t n = from; n < to; ++n)
        claims.push_back(claim_of(key(n), seconds, n + 1, expires));
    auto results =
        store->fingerprints().claim_fingerprints("s", claims, test::unix_seconds(seconds));
    store->commit();
    std::size_t firsts = 0;
    for (const auto& result : results)
        firsts += result.first ? 1 : 0;
    return firsts;
}

// The slots' row for `fingerprint` given the rows each seq holds.
std::int64_t row_of(const detail::FingerprintSlots& slots,
                    const std::map<std::int64_t, FingerprintBytes>& rows,
                    const FingerprintBytes& fingerprint) {
    return slots.find(fingerprint, [&](std::int64_t seq) { return rows.at(seq) == fingerprint; })
        .seq;
}

// A fingerprint whose 32 kept bits are `bits` (n tells apart those that
// share them; none is a key(n)).
FingerprintBytes key_with_bits(std::uint32_t bits, std::uint32_t n) {
    FingerprintBytes bytes{};
    std::memcpy(bytes.data(), &bits, sizeof bits);
    std::memcpy(bytes.data() + 4, &n, sizeof n);
    bytes[8] = 1;
    return bytes;
}

// Saved slots over an earlier table's words (as mapped from a file).
detail::SavedSlots saved_copy_of(const detail::FingerprintSlots& table) {
    auto words =
        std::make_shared<std::vector<std::uint64_t>>(table.data(), table.data() + table.capacity());
    detail::SavedSlots saved;
    saved.mapping = words;
    saved.slots = words->data();
    saved.capacity = table.capacity();
    saved.entries = table.size();
    return saved;
}

// Claims fingerprints into slots as the store does, keeping the rows each
// seq holds (row_of() reads them).
struct Claimer {
    std::map<std::int64_t, FingerprintBytes> rows;
    std::int64_t seq = 0;
    detail::FingerprintSlots::Change operator()(detail::FingerprintSlots& slots,
                                                const FingerprintBytes& fingerprint) {
        auto place =
            slots.find(fingerprint, [&](std::int64_t row) { return rows.at(row) == fingerprint; });
        rows[++seq] = fingerprint;
        return slots.put(fingerprint, place, seq);
    }
};

} // namespace

TEST_CASE("the slots find every fingerprint through growth, by its row") {
    detail::FingerprintSlots slots;
    std::map<std::int64_t, FingerprintBytes> rows;
    constexpr std::uint32_t k_entries = 150'000; // past the first capacity: it grows twice
    for (std::uint32_t n = 0; n < k_entries; ++n) {
        auto place = slots.find(key(n), [&](std::int64_t seq) { return rows.at(seq) == key(n); });
        REQUIRE(place.seq == 0);
        rows[n + 1] = key(n);
        slots.put(key(n), place, n + 1);
    }
    CHECK(slots.size() == k_entries);
    CHECK(slots.capacity() == (1U << 18)); // at most 80% full
    for (std::uint32_t n = 0; n < k_entries; n += 101)
        CHECK(row_of(slots, rows, key(n)) == n + 1);
    // A later first copy of a fingerprint takes its slot, not a new one.
    auto place = slots.find(key(7), [&](std::int64_t seq) { return rows.at(seq) == key(7); });
    rows[k_entries + 1] = key(7);
    slots.put(key(7), place, k_entries + 1);
    CHECK(slots.size() == k_entries);
    CHECK(row_of(slots, rows, key(7)) == k_entries + 1);
}

TEST_CASE("fingerprints that share the slots' 32 bits are told apart by their rows") {
    detail::FingerprintSlots slots;
    std::map<std::int64_t, FingerprintBytes> rows;
    auto same_bits = [](std::uint8_t last) {
        FingerprintBytes bytes{};
        bytes.fill(0x5a);
        bytes[15] = last;
        return bytes;
    };
    for (std::uint8_t n = 0; n < 40; ++n) {
        auto place = slots.find(same_bits(n),
                                [&](std::int64_t seq) { return rows.at(seq) == same_bits(n); });
        REQUIRE(place.seq == 0);
        rows[n + 1] = same_bits(n);
        slots.put(same_bits(n), place, n + 1);
    }
    for (std::uint8_t n = 0; n < 40; ++n)
        CHECK(row_of(slots, rows, same_bits(n)) == n + 1);
    // A row gone from the log (collected) is passed over, not taken for it.
    rows[5] = FingerprintBytes{};
    CHECK(row_of(slots, rows, same_bits(4)) == 0);
}

TEST_CASE("changes replayed on an earlier copy of the slots make the same index") {
    // What the next process does with a saved delta: the slots as saved, a
    // smaller table, then every change made since, in order.
    detail::FingerprintSlots slots;
    std::map<std::int64_t, FingerprintBytes> rows;
    std::vector<detail::FingerprintSlots::Change> changes;
    std::vector<std::uint64_t> saved;
    std::size_t saved_capacity = 0, saved_entries = 0;
    std::int64_t seq = 0;
    auto claim = [&](const FingerprintBytes& fingerprint) {
        auto place =
            slots.find(fingerprint, [&](std::int64_t row) { return rows.at(row) == fingerprint; });
        rows[++seq] = fingerprint;
        auto change = slots.put(fingerprint, place, seq);
        if (saved_capacity != 0) changes.push_back(change);
        return change;
    };
    for (std::uint32_t n = 0; n < 40'000; ++n)
        claim(key(n));
    saved.assign(slots.data(), slots.data() + slots.capacity());
    saved_capacity = slots.capacity();
    saved_entries = slots.size();
    // Since: new fingerprints (the table grows), first copies claimed anew
    // (their slot is rewritten), and fingerprints sharing 32 bits with one
    // already there.
    for (std::uint32_t n = 40'000; n < 100'000; ++n)
        claim(key(n));
    for (std::uint32_t n = 0; n < 40'000; n += 7)
        CHECK(claim(key(n)).replaced != 0);
    for (std::uint8_t n = 0; n < 8; ++n) {
        auto twin = key(11);
        twin[15] = static_cast<std::uint8_t>(twin[15] ^ (n + 1));
        CHECK(claim(twin).replaced == 0);
    }
    REQUIRE(slots.capacity() > saved_capacity);

    detail::FingerprintSlots replayed;
    std::copy(saved.begin(), saved.end(),
              replayed.assign(saved_capacity, saved_entries, slots.base()));
    REQUIRE(replayed.apply(changes.data(), changes.size()));
    CHECK(replayed.size() == slots.size());
    CHECK(replayed.occupied() == slots.occupied());
    for (std::uint32_t n = 0; n < 100'000; n += 3)
        CHECK(row_of(replayed, rows, key(n)) == row_of(slots, rows, key(n)));
    CHECK(row_of(replayed, rows, key(14)) > 100'000); // claimed anew: its latest row

    // A change that replaces a value the table does not hold cannot be
    // replayed: the caller drops the table.
    detail::FingerprintSlots other;
    std::copy(saved.begin(), saved.end(),
              other.assign(saved_capacity, saved_entries, slots.base()));
    auto wrong = changes.back();
    wrong.replaced = wrong.put ^ 0x1234; // same 32 bits, a row it never held
    CHECK_FALSE(other.apply(&wrong, 1));
    detail::FingerprintSlots::Change empty_row{std::uint64_t{0x77} << 32, 0}; // row 0 is none
    CHECK_FALSE(other.apply(&empty_row, 1));
}

TEST_CASE("the slots keep rows within 2^32 of their base, and say when one is not") {
    detail::FingerprintSlots slots(1000);
    CHECK_FALSE(slots.fits(1000));
    CHECK(slots.fits(1001));
    CHECK(slots.fits(1000 + (std::int64_t{1} << 32) - 1));
    CHECK_FALSE(slots.fits(1000 + (std::int64_t{1} << 32)));
}

TEST_CASE("repeats are kept as rows up to the bound; the first copy counts them all") {
    TempStore file("log");
    constexpr std::uint64_t k_copies = 30;
    {
        auto store = open_store(parse_store_uri(file.path));
        std::vector<FingerprintClaim> claims;
        for (std::uint64_t line = 1; line <= k_copies; ++line)
            claims.push_back(claim_of(key(1), static_cast<long long>(line), line));
        auto results = store->fingerprints().claim_fingerprints("s", claims, test::unix_seconds(1));
        CHECK(results.back().seen_count == k_copies);
        store->commit();
    }
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_log WHERE kind = 2") ==
          static_cast<long long>(k_kept_repeats));
    CHECK(count(file.path, "SELECT repeats FROM fingerprint_repeats") ==
          static_cast<long long>(k_copies - 1));
    auto store = open_store(parse_store_uri(file.path));
    // The next process goes on counting.
    auto again = store->fingerprints().claim_fingerprints("s", {claim_of(key(1), 100, 31)},
                                                          test::unix_seconds(100));
    CHECK(again[0].seen_count == k_copies + 1);
    CHECK(again[0].first_line == 1);
    store->commit();
    // Evidence: the first copy, the kept repeats, and the latest copy with
    // the number not kept before it.
    std::vector<FingerprintRecord> records;
    store->evidence().for_each_fingerprint_record(
        "s", [&](const FingerprintRecord& record) { records.push_back(record); });
    REQUIRE(records.size() == 1 + k_kept_repeats + 1);
    CHECK(records.front().first);
    CHECK(records[1].line == 2);
    CHECK(records.back().line == 31);
    CHECK(records.back().event_time == test::unix_seconds(100));
    CHECK(records.back().copies_not_kept == k_copies - 1 - k_kept_repeats);
    CHECK(records.back().fingerprint == key(1));
}

TEST_CASE("the next process maps the saved index, and ignores one it cannot trust") {
    TempStore file("log");
    constexpr std::uint32_t k_keys = 20'000;
    {
        auto store = open_store(parse_store_uri(file.path));
        std::vector<FingerprintClaim> claims;
        for (std::uint32_t n = 0; n < k_keys; ++n)
            claims.push_back(claim_of(key(n), 10, n + 1));
        store->fingerprints().claim_fingerprints("s", claims, test::unix_seconds(10));
        store->commit();
    } // saved at close
    CHECK(count(file.path, "SELECT covers_seq FROM fingerprint_index") == k_keys);
    // The file the store's row names.
    auto named_file = [&] {
        auto token = count(file.path, "SELECT token FROM fingerprint_index");
        return fmt::format("{}-index-{:016x}", file.path, static_cast<std::uint64_t>(token));
    };
    REQUIRE(file.index_files() == std::vector<std::string>{named_file()});
    auto judge = [&](std::uint32_t from, std::uint32_t to) {
        return claim_in_a_new_process(file.path, from, to, 20);
    };
    // Half seen, half new: judged alike with the saved index ...
    auto first_file = named_file();
    CHECK(judge(k_keys / 2, k_keys + k_keys / 2) == k_keys / 2);
    // ... after rows it does not cover (the rerun above appended them) ...
    CHECK(judge(0, k_keys + k_keys / 2 + 10) == 10);
    // Past the deltas' limit, the index was saved whole again, in a new
    // file; the one before stays for a process that may have yet to map it.
    auto files = file.index_files();
    CHECK(files.size() == 2);
    std::filesystem::remove(first_file);
    auto path_now = named_file();
    auto damage = [&](auto&& change) {
        std::fstream stream(path_now, std::ios::in | std::ios::out | std::ios::binary);
        REQUIRE(stream);
        change(stream);
    };
    // ... and, from the log alone, when its file is cut short ...
    std::filesystem::resize_file(path_now, 4096 + 100);
    CHECK(judge(0, k_keys + k_keys / 2 + 20) == 10);
    // (the process that found it unusable saved it again, whole)
    path_now = named_file();
    CHECK(std::filesystem::file_size(path_now) > 4096 + 100);
    // ... or names another table in its header ...
    damage([](std::fstream& stream) {
        stream.seekp(16);
        stream.put('\x5a');
    });
    CHECK(judge(0, k_keys + k_keys / 2 + 30) == 10);
    path_now = named_file();
    // ... or is gone ...
    std::filesystem::remove(path_now);
    CHECK(judge(0, k_keys + k_keys / 2 + 40) == 10);
    path_now = named_file();
    // A probe ends even in slots damaged in place so that none is empty
    // (the header still right: what is damaged there cannot be told).
    auto slots_bytes = std::filesystem::file_size(path_now) - 4096;
    damage([&](std::fstream& stream) {
        stream.seekp(4096);
        std::string full(slots_bytes, '\xab');
        stream.write(full.data(), static_cast<std::streamsize>(full.size()));
    });
    CHECK(judge(k_keys + k_keys / 2 + 40, k_keys + k_keys / 2 + 50) == 10);
    // Every file no row names went with the last save whole.
    CHECK(file.index_files().size() <= 2);
}

TEST_CASE("a process that added few first copies saves a delta, and the next replays it") {
    TempStore file("log");
    constexpr std::uint32_t k_keys = 20'000;
    // The first 1,000 alive until 15: claimed again at 20, they are first
    // copies anew (too few expired for the store to collect them).
    CHECK(claim_in_a_new_process(file.path, 0, 1'000, 10, 15) == 1'000);
    CHECK(claim_in_a_new_process(file.path, 1'000, k_keys, 10) == k_keys - 1'000);
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_index_delta") == 0); // saved whole
    auto covered = count(file.path, "SELECT covers_seq FROM fingerprint_index");
    CHECK(covered == k_keys);
    // 1,000 claimed anew, 1,000 new: 2,000 changes, within the 5,000 (a
    // quarter of the fingerprints) the deltas may hold at this size.
    CHECK(claim_in_a_new_process(file.path, 0, 1'000, 20) == 1'000);
    CHECK(claim_in_a_new_process(file.path, k_keys, k_keys + 1'000, 20) == 1'000);
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_index_delta") == 2);
    CHECK(count(file.path, "SELECT sum(length(changes)) / 16 FROM fingerprint_index_delta") ==
          2'000);
    CHECK(count(file.path, "SELECT covers_seq FROM fingerprint_index") == covered);
    CHECK(count(file.path, "SELECT max(covers_seq) FROM fingerprint_index_delta") ==
          covered + 2'000);
    // The next process takes those rows from the deltas, not the log: with
    // them hidden from a read of the log (another scope), they still count.
    execute(file.path, "UPDATE fingerprint_log SET scope = 'hidden' WHERE seq > 20000");
    auto judge = [&](long long seconds) {
        return claim_in_a_new_process(file.path, 0, 2'000, seconds) +
               claim_in_a_new_process(file.path, k_keys, k_keys + 1'000, seconds);
    };
    // Without the delta, the slots of 0 .. 1,000 would name their expired
    // rows, and 20,000 .. 21,000 would have none: all first copies.
    CHECK(judge(30) == 0);
    execute(file.path, "UPDATE fingerprint_log SET scope = 's' WHERE scope = 'hidden'");
    // A delta that does not fit the saved slots is dropped, and the log read.
    execute(file.path, "UPDATE fingerprint_index_delta SET changes = "
                       "CAST(replace(hex(zeroblob(length(changes) / 2)), '00', 'AB') AS BLOB)");
    CHECK(judge(40) == 0);
    // Past the limit, the slots are saved whole and the deltas they cover go.
    CHECK(claim_in_a_new_process(file.path, 2 * k_keys, 2 * k_keys + 5'000, 50) == 5'000);
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_index_delta") == 0);
    CHECK(count(file.path, "SELECT covers_seq FROM fingerprint_index") ==
          count(file.path, "SELECT max(seq) FROM fingerprint_log"));
}

TEST_CASE("two processes' overlapping deltas replay as one") {
    TempStore file("log");
    CHECK(claim_in_a_new_process(file.path, 0, 10'000, 10) == 10'000); // saved whole
    {
        auto one = open_store(parse_store_uri(file.path));
        auto two = open_store(parse_store_uri(file.path));
        auto claim = [](Store& store, std::uint32_t from, std::uint32_t to) {
            std::vector<FingerprintClaim> claims;
            for (auto n = from; n < to; ++n)
                claims.push_back(claim_of(key(n), 20, n + 1));
            auto results =
                store.fingerprints().claim_fingerprints("s", claims, test::unix_seconds(20));
            store.commit();
            return results;
        };
        claim(*one, 10'000, 10'500);
        claim(*two, 10'500, 11'000); // catches up on one's rows: its changes hold them too
        claim(*one, 11'000, 11'200);
        // one saves its changes (10,000 .. 10,500 and 11,000 .. 11,200) at
        // close; two, closed after, only what one's delta does not cover.
    }
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_index_delta") == 2);
    execute(file.path, "UPDATE fingerprint_log SET scope = 'hidden' WHERE seq > 10000");
    CHECK(claim_in_a_new_process(file.path, 9'990, 11'210, 30) == 10); // 11,200 .. 11,210
}

TEST_CASE("read back from the log, a fingerprint claimed anew after expiry keeps its latest row") {
    // The log is read in batches of 4,096 rows: 6,000 keys claimed twice put
    // each key's two first copies in different batches.
    TempStore file("log");
    constexpr std::uint32_t k_keys = 6'000;
    auto claim_all = [&](long long seconds, long long expires) {
        return claim_in_a_new_process(file.path, 0, k_keys, seconds, expires);
    };
    CHECK(claim_all(10, 15) == k_keys);
    CHECK(claim_all(20, 100) == k_keys); // the first ones expired at 15
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_log WHERE kind = 1") == 2 * k_keys);
    execute(file.path, "DELETE FROM fingerprint_index"); // the next process reads the log
    CHECK(claim_all(30, 100) == 0);                      // the second copies, alive until 100, hold
    auto store = open_store(parse_store_uri(file.path));
    std::vector<FingerprintClaim> claims{claim_of(key(7), 40, 1, 100)};
    auto results = store->fingerprints().claim_fingerprints("s", claims, test::unix_seconds(40));
    REQUIRE(results.size() == 1);
    CHECK_FALSE(results[0].first);
    CHECK(results[0].first_seen ==
          test::unix_seconds(20)); // the copy claimed anew, not the expired one
}

TEST_CASE("a seq is never given twice, even after the highest rows were collected") {
    TempStore file("log");
    auto one = open_store(parse_store_uri(file.path));
    auto two = open_store(parse_store_uri(file.path));
    one->fingerprints().claim_fingerprints("s", {claim_of(key(1), 10, 1)}, test::unix_seconds(10));
    one->commit();
    // The highest row expires early and is collected; `two` has seen it.
    two->fingerprints().claim_fingerprints("s", {claim_of(key(2), 10, 1, 50)},
                                           test::unix_seconds(10));
    two->commit();
    CHECK(one->collect_garbage(test::unix_seconds(60)) == 1);
    // A fingerprint claimed now must reach `two` when it catches up.
    CHECK(one->fingerprints()
              .claim_fingerprints("s", {claim_of(key(3), 70, 1)}, test::unix_seconds(70))[0]
              .first);
    one->commit();
    CHECK_FALSE(two->fingerprints()
                    .claim_fingerprints("s", {claim_of(key(3), 71, 2)}, test::unix_seconds(71))[0]
                    .first);
    two->commit();
}

TEST_CASE("slots over saved ones find both, and a fingerprint claimed anew takes its new row") {
    // What a process opening the store has: the slots an earlier one saved
    // whole (read-only, as mapped from their file), and its own above them.
    detail::FingerprintSlots first;
    Claimer claim;
    const auto& rows = claim.rows;
    for (std::uint32_t n = 0; n < 40'000; ++n)
        claim(first, key(n));
    auto saved = saved_copy_of(first);
    detail::FingerprintSlots slots(saved, first.base());
    CHECK(slots.size() == 40'000);
    CHECK(slots.capacity() == 0); // nothing of its own yet
    for (std::uint32_t n = 0; n < 40'000; n += 7)
        CHECK(row_of(slots, rows, key(n)) == n + 1);
    std::vector<detail::FingerprintSlots::Change> changes;
    for (std::uint32_t n = 40'000; n < 60'000; ++n)
        changes.push_back(claim(slots, key(n)));
    for (std::uint32_t n = 0; n < 40'000; n += 5) {
        auto change = claim(slots, key(n)); // claimed anew
        CHECK(change.replaced != 0);
        changes.push_back(change);
    }
    for (std::uint32_t n = 40'000; n < 40'100; ++n) // put since, and claimed anew after
        changes.push_back(claim(slots, key(n)));
    CHECK(slots.size() == 60'000);
    CHECK(slots.occupied() == 60'000);
    std::vector<std::uint64_t> saved_before(saved.slots, saved.slots + saved.capacity);
    for (std::uint32_t n = 0; n < 60'000; n += 3) {
        auto row = row_of(slots, rows, key(n));
        if ((n < 40'000 && n % 5 == 0) || (n >= 40'000 && n < 40'100))
            CHECK(row > 60'000);
        else
            CHECK(row == n + 1);
    }
    CHECK(std::equal(saved_before.begin(), saved_before.end(), saved.slots)); // never written

    // The same changes replayed over the saved slots make the same index,
    // and merged into one table they make it too.
    detail::FingerprintSlots replayed(saved, first.base());
    REQUIRE(replayed.apply(changes.data(), changes.size()));
    auto merged = slots.merged();
    REQUIRE(merged);
    CHECK_FALSE(merged->has_saved());
    CHECK(merged->size() == 60'000);
    CHECK(merged->occupied() == 60'000);
    for (std::uint32_t n = 0; n < 60'000; ++n) {
        auto row = row_of(slots, rows, key(n));
        CHECK(row_of(replayed, rows, key(n)) == row);
        CHECK(row_of(*merged, rows, key(n)) == row);
    }
    // A change replacing a value neither table holds does not fit.
    detail::FingerprintSlots other(saved, first.base());
    auto wrong = changes.back();
    wrong.replaced = wrong.put ^ 0x1234;
    CHECK_FALSE(other.apply(&wrong, 1));
}

TEST_CASE("a merge streamed in pieces is the table merged() makes, wrapped values and all") {
    // 300 fingerprints whose home is the last slot run past it into the
    // first ones, in the saved table and in the one above it.
    Claimer claim;
    const auto& rows = claim.rows;
    std::vector<FingerprintBytes> keys;
    for (std::uint32_t n = 0; n < 30'000; ++n)
        keys.push_back(key(n));
    for (std::uint32_t n = 0; n < 300; ++n)
        keys.push_back(key_with_bits(0xffffff00U + (n % 7), n));
    for (std::uint32_t n = 0; n < 200; ++n) // the first home slots, where the wrapped ones go
        keys.push_back(key_with_bits(n % 3, n));
    detail::FingerprintSlots first;
    for (const auto& fingerprint : keys)
        claim(first, fingerprint);
    REQUIRE(first.capacity() == (1U << 16));
    detail::FingerprintSlots slots(saved_copy_of(first), first.base());
    for (std::uint32_t n = 30'000; n < 60'000; ++n) { // the merged table is larger
        keys.push_back(key(n));
        claim(slots, keys.back());
    }
    for (std::uint32_t n = 300; n < 400; ++n) {
        keys.push_back(key_with_bits(0xffffff00U + (n % 7), n));
        claim(slots, keys.back());
    }
    for (std::size_t i = 0; i < keys.size(); i += 9) // claimed anew, saved ones among them
        claim(slots, keys[i]);
    REQUIRE(slots.size() == keys.size());

    auto capacity = slots.merged_capacity();
    REQUIRE(capacity == (1U << 17));
    std::vector<std::uint64_t> words(capacity, 0);
    std::vector<int> times_put(capacity, 0);
    std::vector<std::size_t> order;
    auto put = [&](std::size_t from, const std::uint64_t* piece, std::size_t count) {
        order.push_back(from);
        for (std::size_t i = 0; i < count; ++i) {
            words[from + i] = piece[i];
            ++times_put[from + i];
        }
        return true;
    };
    REQUIRE(slots.write_merged(put, 4096));
    CHECK(std::all_of(times_put.begin(), times_put.end(), [](int n) { return n == 1; }));
    REQUIRE(order.size() == capacity / 4096);
    CHECK(order.back() == 0); // the first piece last, with the wrapped values
    auto wrapped = std::count_if(words.begin(), words.begin() + 4096,
                                 [](std::uint64_t word) { return (word >> 32) >= 0xffffff00U; });
    CHECK(wrapped > 300);

    // Loaded back, the streamed table answers as the slots it came from,
    // and as the one merged() builds by probing.
    auto merged = slots.merged();
    REQUIRE(merged);
    CHECK(merged->capacity() == capacity);
    detail::FingerprintSlots loaded;
    auto* into = loaded.assign(capacity, slots.size(), slots.base());
    std::copy(words.begin(), words.end(), into);
    CHECK(loaded.occupied() == keys.size());
    for (const auto& fingerprint : keys) {
        auto row = row_of(slots, rows, fingerprint);
        REQUIRE(row != 0);
        CHECK(row_of(loaded, rows, fingerprint) == row);
        CHECK(row_of(*merged, rows, fingerprint) == row);
    }

    // Pieces too small for the values that wrapped: not streamed (the
    // store merges in memory then); a refused put stops the merge.
    CHECK_FALSE(slots.write_merged(put, 64));
    CHECK_FALSE(slots.write_merged(
        [](std::size_t, const std::uint64_t*, std::size_t) { return false; }, 4096));
    // Saved slots that do not hold the count they claim are not merged.
    auto lying = saved_copy_of(first);
    lying.entries += 1;
    detail::FingerprintSlots over_lying(lying, first.base());
    CHECK_FALSE(over_lying.write_merged(put, 4096));
    CHECK_FALSE(over_lying.merged());
    // Nor streamed, when out of order (a damaged file): two filled slots of
    // different homes swapped in the saved table. merged() probes, and
    // still finds every value it holds.
    auto words_of_first =
        std::make_shared<std::vector<std::uint64_t>>(first.data(), first.data() + first.capacity());
    auto& swapped = *words_of_first;
    std::size_t low = 100;
    while (swapped[low] == 0 || swapped[low + 1] != 0)
        ++low; // a cluster's last slot
    std::size_t high = low + 2;
    while (swapped[high] == 0)
        ++high; // the next cluster's first
    std::swap(swapped[low], swapped[high]);
    auto damaged = saved_copy_of(first);
    damaged.mapping = words_of_first;
    damaged.slots = words_of_first->data();
    detail::FingerprintSlots over_damaged(damaged, first.base());
    CHECK_FALSE(over_damaged.write_merged(put, 4096));
    auto probed = over_damaged.merged();
    REQUIRE(probed);
    CHECK(probed->occupied() == first.size());
}

TEST_CASE("slots mapped from a file still answer after a merge gave their pages back") {
    TempStore file("merge");
    std::map<std::int64_t, FingerprintBytes> rows;
    detail::FingerprintSlots first;
    for (std::uint32_t n = 0; n < 200'000; ++n) { // 2 MiB of slots: given back as walked
        auto place = first.find(key(n), [](std::int64_t) { return false; });
        rows[n + 1] = key(n);
        first.put(key(n), place, n + 1);
    }
    detail::SavedSlotsIdentity identity;
    identity.token = detail::new_saved_slots_token();
    identity.covers_seq = 200'000;
    identity.capacity = first.capacity();
    identity.entries = first.size();
    identity.base = first.base();
    REQUIRE(detail::write_saved_slots(file.path, identity, first.data()));
    auto saved = detail::map_saved_slots(file.path, identity);
    REQUIRE(saved);
    CHECK(saved->from_file);
    detail::FingerprintSlots slots(*saved, first.base());
    for (std::uint32_t n = 0; n < 200'000; n += 13)
        CHECK(row_of(slots, rows, key(n)) == n + 1); // the pages touched
    std::size_t put_slots = 0;
    REQUIRE(slots.write_merged([&](std::size_t, const std::uint64_t*, std::size_t count) {
        put_slots += count;
        return true;
    }));
    CHECK(put_slots == slots.merged_capacity());
    for (std::uint32_t n = 0; n < 200'000; n += 7)
        CHECK(row_of(slots, rows, key(n)) == n + 1); // read again from the file
}

TEST_CASE("a save whole removes the index files no row names, and a died writer's temporary") {
    TempStore file("log");
    CHECK(claim_in_a_new_process(file.path, 0, 10'000, 10) == 10'000); // saved whole
    auto named = [&] {
        auto token = count(file.path, "SELECT token FROM fingerprint_index");
        return fmt::format("{}-index-{:016x}", file.path, static_cast<std::uint64_t>(token));
    };
    auto first = named();
    auto stray = file.path + "-index-00000000000000aa";
    auto temporary = file.path + "-index-0123456789abcdef.tmp";
    auto someone_elses = file.path + "-index-notes.txt";
    for (const auto& path : {stray, temporary, someone_elses})
        std::ofstream(path) << "x";
    // Past the deltas' limit (4,096 at this size): saved whole again.
    CHECK(claim_in_a_new_process(file.path, 10'000, 15'000, 20) == 5'000);
    auto second = named();
    CHECK(second != first);
    CHECK(std::filesystem::exists(second));
    CHECK(std::filesystem::exists(first)); // kept for a process that read its row
    CHECK_FALSE(std::filesystem::exists(stray));
    CHECK_FALSE(std::filesystem::exists(temporary));
    CHECK(std::filesystem::exists(someone_elses)); // not a name the store gives
    std::filesystem::remove(someone_elses);
    CHECK(claim_in_a_new_process(file.path, 15'000, 21'000, 30) == 6'000); // and again
    CHECK_FALSE(std::filesystem::exists(first));
    CHECK(std::filesystem::exists(named()));
}

TEST_CASE("after a run of repeats only, the next process still maps the saved file") {
    // A rerun whose every record was seen adds rows (repeats kept as
    // evidence) but no first copy: it moves the row's mark past the rows
    // the file covers, and the file still holds every first copy.
    TempStore file("log");
    constexpr std::uint32_t k_keys = 10'000;
    CHECK(claim_in_a_new_process(file.path, 0, k_keys, 10) == k_keys); // saved whole
    auto covered = count(file.path, "SELECT covers_seq FROM fingerprint_index");
    CHECK(claim_in_a_new_process(file.path, 0, k_keys, 20) == 0); // all repeats
    CHECK(count(file.path, "SELECT covers_seq FROM fingerprint_index") > covered);
    CHECK(count(file.path, "SELECT count(*) FROM fingerprint_index_delta") == 0);
    // Hidden from a read of the log, the first copies are found through the
    // file alone: read from the log, they would all be new.
    execute(file.path, "UPDATE fingerprint_log SET scope = 'hidden' WHERE kind = 1");
    CHECK(claim_in_a_new_process(file.path, 0, k_keys, 30) == 0);
}

TEST_CASE("room is made ahead for a run's records only in a table of its own") {
    // Above saved slots a rerun of what the store holds adds nothing: room
    // for all its records would be zeroed and never used.
    detail::FingerprintSlots own;
    CHECK(detail::room_ahead(own, 1'000'000) == 1'000'000);
    std::vector<std::uint64_t> words(1 << 16, 0);
    detail::SavedSlots saved;
    saved.slots = words.data();
    saved.capacity = words.size();
    detail::FingerprintSlots above(saved, 0);
    CHECK(detail::room_ahead(above, 1'000'000) == 0);
    above.reserve(above.size() + detail::room_ahead(above, 1'000'000));
    CHECK(above.capacity() <= (1U << 16));
}
