#include "idem/io/block_reader.hpp"
#include "idem/util/huge_pages.hpp"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <malloc.h>
#include <numeric>

using idem::HugeVector;
using idem::k_huge_page_bytes;

namespace {
bool huge_page_aligned(const void* data) {
    return reinterpret_cast<std::uintptr_t>(data) % k_huge_page_bytes == 0;
}
} // namespace

TEST_CASE("a huge vector keeps its elements as it grows from the heap into mappings and back") {
    HugeVector<std::uint64_t> numbers;
    // From a few bytes (the heap's) through several MiB (mappings of their
    // own, each a whole number of huge pages at a 2 MiB boundary).
    constexpr std::size_t k_count = 3'000'000; // 24 MB
    bool aligned = true;
    for (std::uint64_t i = 0; i < k_count; ++i) {
        numbers.push_back(i * 7);
        if (numbers.capacity() * sizeof(std::uint64_t) >= k_huge_page_bytes)
            aligned = aligned && huge_page_aligned(numbers.data());
    }
    CHECK(aligned);
    bool kept = true;
    for (std::uint64_t i = 0; i < k_count; ++i)
        kept = kept && numbers[i] == i * 7;
    CHECK(kept);
    // Shrunk below a huge page, it is the heap's again, contents kept.
    numbers.resize(1000);
    numbers.shrink_to_fit();
    CHECK(numbers.capacity() == 1000);
    CHECK(numbers[999] == 999 * 7);
    // From 1 MiB an array is whole huge pages: one made and freed over and
    // over (a ledger per spilled partition) faults once each time.
    HugeVector<char> middling(idem::k_huge_from_bytes + 1);
    CHECK(huge_page_aligned(middling.data()));
    HugeVector<char> small(idem::k_huge_from_bytes - 1);
    CHECK(small.size() == idem::k_huge_from_bytes - 1);
    // Copies and moves are plain vectors' (the allocator has no state).
    HugeVector<std::uint64_t> big(k_count, 1);
    auto copy = big;
    CHECK(huge_page_aligned(copy.data()));
    CHECK(std::accumulate(copy.begin(), copy.end(), std::uint64_t{0}) == k_count);
    auto moved = std::move(big);
    CHECK(moved.size() == k_count);
}

TEST_CASE("a huge allocation too large to exist is bad_alloc, not a smaller block") {
    idem::HugePageAllocator<std::uint64_t> allocator;
    CHECK_THROWS_AS((void)allocator.allocate(SIZE_MAX / 4), std::bad_alloc);
    CHECK_THROWS_AS((void)allocator.allocate(SIZE_MAX / 8 - 1), std::bad_alloc);
}

TEST_CASE("a block's buffer past 1 MiB is whole huge pages and keeps what it held") {
    idem::io::ByteBuffer buffer;
    buffer.reserve(100, 0);
    std::memcpy(buffer.data(), "the first bytes", 15);
    buffer.reserve((std::size_t{1} << 20) + 64, 15);
    CHECK(buffer.capacity() == k_huge_page_bytes);
    CHECK(huge_page_aligned(buffer.data()));
    CHECK(std::memcmp(buffer.data(), "the first bytes", 15) == 0);
    buffer.data()[buffer.capacity() - 1] = 'x'; // all of it is writable
    buffer.reserve(3 * k_huge_page_bytes, buffer.capacity());
    CHECK(buffer.capacity() == 3 * k_huge_page_bytes);
    CHECK(std::memcmp(buffer.data(), "the first bytes", 15) == 0);
    CHECK(buffer.data()[k_huge_page_bytes - 1] == 'x');
}

TEST_CASE("after keep_freed_memory_for_reuse a buffer of 24 MiB is the heap's, not a mapping") {
    idem::keep_freed_memory_for_reuse();
    auto mapped_before = mallinfo2().hblks;
    void* volatile buffer = std::malloc(std::size_t{24} << 20); // not elided
    REQUIRE(buffer != nullptr);
    CHECK(mallinfo2().hblks == mapped_before); // glibc's default maps it (128 KiB and up)
    std::free(buffer);
}
