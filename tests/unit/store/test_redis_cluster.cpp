#include "idem/store/redis/redis_cluster.hpp"

#include <doctest/doctest.h>

using idem::store::detail::key_slot;

TEST_CASE("a key's cluster slot is CRC16 of its hash tag, as the Redis Cluster spec gives") {
    // The Redis Cluster specification: "123456789" has CRC16 0x31C3, and
    // 0x31C3 % 16384 = 12739; "foo" is in slot 12182 (CLUSTER KEYSLOT foo).
    CHECK(key_slot("123456789") == 12739);
    CHECK(key_slot("foo") == 12182);
    // Keys with the same tag share a slot, whatever surrounds it.
    CHECK(key_slot("{user1000}.following") == key_slot("{user1000}.followers"));
    CHECK(key_slot("{user1000}.following") == key_slot("user1000"));
    // Only the first {...} counts; an empty one does not make a tag.
    CHECK(key_slot("foo{}{bar}") == key_slot("foo{}{bar}"));
    CHECK(key_slot("foo{}{bar}") != key_slot("bar"));
    CHECK(key_slot("foo{{bar}}zap") == key_slot("{bar"));
    CHECK(key_slot("foo{bar}{zap}") == key_slot("bar"));
    // idem's keys: a fingerprint and its evidence in one slot.
    CHECK(key_slot("idem:fp:{default:00ff}") == key_slot("idem:dups:{default:00ff}"));
}
