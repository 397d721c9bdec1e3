#pragma once
// Memory that is not faulted in page by page: large arrays backed by huge
// pages, and a heap that keeps what it frees.
//
// A first write to a 4 KiB page faults, and a fault costs about 10 µs on
// the virtual machines idem runs on: a million-record `states` run took
// 14,000 faults, a third of its processor time, most of them in tables
// that grow by doubling (an entity index, its entities, the records of a
// block). Where the kernel grants transparent huge pages on request
// (`madvise` mode, as Debian ships it), one fault maps 2 MiB. Elsewhere
// the advice is ignored and the memory is what it was.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <vector>

#include <sys/mman.h>

namespace idem {

inline constexpr std::size_t k_huge_page_bytes = std::size_t{2} << 20;
// The page size mappings are walked, populated and given back by (Linux on
// x86-64 and arm64 as Debian builds it).
inline constexpr std::size_t k_small_page_bytes = 4096;
// From this size an array is given whole huge pages (at most twice what it
// asked for): one of 1-2 MiB made and freed over and over (a ledger per
// spilled partition) otherwise faults its 4 KiB pages in each time.
inline constexpr std::size_t k_huge_from_bytes = std::size_t{1} << 20;

// Advises the whole 2 MiB stretches within [data, data + bytes).
inline void advise_huge_pages(const void* data, std::size_t bytes) {
    constexpr std::uintptr_t k_huge = k_huge_page_bytes;
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

// `bytes` rounded up to whole huge pages (0 when that overflows).
[[nodiscard]] constexpr std::size_t whole_huge_pages(std::size_t bytes) {
    return (bytes + k_huge_page_bytes - 1) & ~(k_huge_page_bytes - 1);
}

// whole_huge_pages(bytes), mapped at a 2 MiB boundary and advised; throws
// std::bad_alloc. Freed by unmap_huge_pages(data, bytes).
[[nodiscard]] void* map_huge_pages(std::size_t bytes);
void unmap_huge_pages(void* data, std::size_t bytes) noexcept;

// An allocator for arrays that grow large: an allocation of 1 MiB or more
// (k_huge_from_bytes) is its own mapping of whole huge pages, aligned to
// and advised for them, and goes back to the system whole when freed; a
// smaller one is std::allocator's. A vector growing by doubling through it
// faults once per 2 MiB where it faulted once per 4 KiB.
template <typename T> class HugePageAllocator {
public:
    using value_type = T;

    HugePageAllocator() noexcept = default;
    template <typename U>
    // NOLINTNEXTLINE(google-explicit-constructor): allocators rebind implicitly
    HugePageAllocator(const HugePageAllocator<U>& /*other*/) noexcept {}

    [[nodiscard]] T* allocate(std::size_t count) {
        if (count > std::numeric_limits<std::size_t>::max() / sizeof(T)) throw std::bad_alloc();
        auto bytes = count * sizeof(T);
        if (bytes < k_huge_from_bytes) return std::allocator<T>().allocate(count);
        return static_cast<T*>(map_huge_pages(bytes));
    }
    void deallocate(T* data, std::size_t count) noexcept {
        auto bytes = count * sizeof(T);
        if (bytes < k_huge_from_bytes) {
            std::allocator<T>().deallocate(data, count);
            return;
        }
        unmap_huge_pages(data, bytes);
    }

    friend bool operator==(const HugePageAllocator& /*a*/, const HugePageAllocator& /*b*/) {
        return true;
    }
};

// Keeps what the heap frees for the heap's next allocations: from 32 MiB an
// allocation is a mapping of its own, and at most 128 MiB free at the
// heap's top goes back to the system. glibc's defaults (a threshold that
// starts at 128 KiB and rises with what is freed, trimming past twice it)
// gave back and faulted in again, per partition of a spilled audit or
// reconcile, buffers of a few MiB: 10,500 faults of a 200k-record audit
// became 7,600 and 13,200 of a spilled 1M reconcile 4,400, peak memory the
// same. Once, at the start of a process.
void keep_freed_memory_for_reuse();

// A vector that may grow to many MiB on a hot path.
template <typename T> using HugeVector = std::vector<T, HugePageAllocator<T>>;

} // namespace idem
