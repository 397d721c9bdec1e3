#include "idem/util/key_index.hpp"

#include <doctest/doctest.h>
#include <string>
#include <unordered_map>

using idem::KeyIndex;

TEST_CASE("keys get dense indexes in the order they first come") {
    KeyIndex index;
    CHECK(index.find_or_add("b") == std::pair<std::uint32_t, bool>{0, true});
    CHECK(index.find_or_add("a") == std::pair<std::uint32_t, bool>{1, true});
    CHECK(index.find_or_add("b") == std::pair<std::uint32_t, bool>{0, false});
    CHECK(index.find("a") == 1U);
    CHECK_FALSE(index.find("c").has_value());
    CHECK(index.name(1) == "a");
    CHECK(index.size() == 2);
    // The empty key is a key like any other.
    CHECK(index.find_or_add("").second);
    CHECK(index.find("") == 2U);
}

TEST_CASE("a key index agrees with a map over growth, prefixes and a caller's hash") {
    KeyIndex index;
    std::unordered_map<std::string, std::uint32_t> expected;
    for (int i = 0; i < 50'000; ++i) {
        // Keys that share prefixes and lengths, and one that is a prefix of
        // another: names are compared whole.
        auto key = "ord_" + std::to_string(i % 20'000) + (i % 3 == 0 ? "" : "x");
        auto [id, added] = index.find_or_add(key, KeyIndex::hash_of(key));
        auto [it, inserted] = expected.emplace(key, static_cast<std::uint32_t>(expected.size()));
        CHECK(added == inserted);
        CHECK(id == it->second);
    }
    CHECK(index.size() == expected.size());
    for (const auto& [key, id] : expected)
        CHECK(index.name(id) == key);
}

TEST_CASE("peek guesses the index from a hash alone; the name still decides") {
    KeyIndex index;
    index.reserve(100);
    auto [id, added] = index.find_or_add("ord_1");
    auto hash = KeyIndex::hash_of("ord_1");
    CHECK(index.peek(hash) == id);
    CHECK_FALSE(index.peek(KeyIndex::hash_of("ord_2")).has_value());
    // A wrong name with the right hash is not found: the hash is only a guess.
    CHECK_FALSE(index.find("not ord_1", hash).has_value());
    CHECK_FALSE(KeyIndex().peek(hash).has_value()); // empty: nothing to peek at
}
