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
    auto address = reinterpret_cast<std::uintptr_t>(data);
    auto begin = (address + k_huge - 1) & ~(k_huge - 1);
    auto end = (address + bytes) & ~(k_huge - 1);
    if (end <= begin) return;
    // An offset from the pointer itself, not an integer made a pointer.
    auto* first = static_cast<char*>(const_cast<void*>(data)) + (begin - address);
    (void)::madvise(first, end - begin, MADV_HUGEPAGE);
}

// Reserves room for `count` elements, advised as above before any is written.
template <typename T, typename Allocator>
void reserve_huge(std::vector<T, Allocator>& vector, std::size_t count) {
    if (count <= vector.capacity()) return;
    vector.reserve(count);
    advise_huge_pages(vector.data(), vector.capacity() * sizeof(T));
}

} // namespace idem
