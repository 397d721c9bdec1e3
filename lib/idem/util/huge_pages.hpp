#pragma once
// Large arrays filled once, asked to be backed by huge pages.
//
// A first write to a 4 KiB page faults, and a fault costs several µs on the
// virtual machines idem runs on: filling a few hundred MB of columns that
// way was a third of `audit` over a million records in memory. Where the
// kernel grants transparent huge pages on request (`madvise` mode, as
// Debian ships it), one fault maps 2 MiB. Elsewhere the advice is ignored.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <sys/mman.h>

namespace idem {

// Advises the whole 2 MiB stretches within [data, data + bytes).
inline void advise_huge_pages(const void* data, std::size_t bytes) {
    constexpr std::uintptr_t k_huge = std::uintptr_t{2} << 20;
    auto begin = (reinterpret_cast<std::uintptr_t>(data) + k_huge - 1) & ~(k_huge - 1);
    auto end = (reinterpret_cast<std::uintptr_t>(data) + bytes) & ~(k_huge - 1);
    if (end > begin) (void)::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
}

// Reserves room for `count` elements, advised as above before any is written.
template <typename T, typename Allocator>
void reserve_huge(std::vector<T, Allocator>& vector, std::size_t count) {
    if (count <= vector.capacity()) return;
    vector.reserve(count);
    advise_huge_pages(vector.data(), vector.capacity() * sizeof(T));
}

} // namespace idem
