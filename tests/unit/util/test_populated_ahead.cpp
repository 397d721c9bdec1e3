#include "idem/util/populated_ahead.hpp"

#include <cstdint>
#include <doctest/doctest.h>
#include <vector>

#include <sys/mman.h>

using idem::HugeVector;
using idem::k_small_page_bytes;
using idem::PopulatedAhead;

namespace {

// How many of the pages of [data, data + bytes) are mapped in (mincore).
std::size_t resident_pages(const void* data, std::size_t bytes) {
    std::vector<unsigned char> flags((bytes + k_small_page_bytes - 1) / k_small_page_bytes);
    REQUIRE(::mincore(const_cast<void*>(data), bytes, flags.data()) == 0);
    std::size_t resident = 0;
    for (auto flag : flags)
        resident += flag & 1;
    return resident;
}

constexpr std::size_t k_mib = std::size_t{1} << 20;

} // namespace

TEST_CASE("the pages just past a growing array's end are mapped before it writes them, no more") {
    HugeVector<std::uint64_t> entries;
    entries.reserve(64 * k_mib / sizeof(std::uint64_t)); // a mapping of its own, untouched
    auto* base = reinterpret_cast<const char*>(entries.data());
    REQUIRE(resident_pages(base, 64 * k_mib) == 0);
    PopulatedAhead populated(8 * k_mib);
    for (std::uint64_t i = 0; i < k_mib / sizeof(std::uint64_t); ++i) { // 1 MiB written
        entries.push_back(i);
        populated.written(entries);
    }
    populated.wait_caught_up();
    // The window past the end is mapped (from the last report, made every
    // quarter window: at least three quarters of it past the end); the
    // reservation beyond it (and beyond the huge page it ends in) is not.
    CHECK(resident_pages(base + k_mib, 6 * k_mib) == 6 * k_mib / k_small_page_bytes);
    CHECK(resident_pages(base + 12 * k_mib, 52 * k_mib) == 0);
    // Contents stay as written: mapping a page does not write it.
    bool kept = true;
    for (std::uint64_t i = 0; i < entries.size(); ++i)
        kept = kept && entries[i] == i;
    CHECK(kept);
}

TEST_CASE("an array that moves is mapped afresh at its new place, never at its old") {
    HugeVector<std::uint64_t> entries;
    PopulatedAhead populated(4 * k_mib);
    bool kept = true;
    // Growing by doubling through several mappings; each move is announced.
    for (std::uint64_t i = 0; i < 3 * k_mib; ++i) { // 24 MiB written
        if (entries.size() == entries.capacity()) populated.before_move();
        entries.push_back(i);
        populated.written(entries);
    }
    populated.wait_caught_up();
    for (std::uint64_t i = 0; i < entries.size(); ++i)
        kept = kept && entries[i] == i;
    CHECK(kept);
    auto written = entries.size() * sizeof(std::uint64_t);
    auto spare = entries.capacity() * sizeof(std::uint64_t) - written;
    auto* end = reinterpret_cast<const char*>(entries.data()) + written;
    // Three quarters of the window at least (the end is reported every quarter).
    auto window = std::min(spare, 3 * k_mib) / k_small_page_bytes * k_small_page_bytes;
    auto into_page = reinterpret_cast<std::uintptr_t>(end) % k_small_page_bytes;
    CHECK(resident_pages(end - into_page + k_small_page_bytes, window - k_small_page_bytes) ==
          (window - k_small_page_bytes) / k_small_page_bytes);
}

TEST_CASE("a small array is left to the heap, and stopping waits for nothing") {
    std::vector<std::uint64_t, idem::HugePageAllocator<std::uint64_t>> small(100);
    PopulatedAhead populated;
    populated.written(small);
    populated.wait_caught_up(); // no thread was started: returns at once
    CHECK(small.size() == 100);
}
