#include "idem/util/huge_pages.hpp"

#include <malloc.h>

namespace idem {

void* map_huge_pages(std::size_t bytes) {
    auto size = whole_huge_pages(bytes);
    if (size < bytes) throw std::bad_alloc();
    // A mapping is only page-aligned: map a huge page more, keep the
    // aligned stretch, and give back what lies before and after it.
    auto reserved = size + k_huge_page_bytes;
    void* mapped =
        ::mmap(nullptr, reserved, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mapped == MAP_FAILED) throw std::bad_alloc();
    auto address = reinterpret_cast<std::uintptr_t>(mapped);
    auto aligned = (address + k_huge_page_bytes - 1) & ~(k_huge_page_bytes - 1);
    auto* start = static_cast<char*>(mapped);
    auto head = aligned - address;
    if (head > 0) ::munmap(start, head);
    auto tail = reserved - head - size;
    if (tail > 0) ::munmap(start + head + size, tail);
    (void)::madvise(start + head, size, MADV_HUGEPAGE);
    return start + head;
}

void unmap_huge_pages(void* data, std::size_t bytes) noexcept {
    ::munmap(data, whole_huge_pages(bytes));
}

void keep_freed_memory_for_reuse() {
    (void)::mallopt(M_MMAP_THRESHOLD, 32 << 20);
    (void)::mallopt(M_TRIM_THRESHOLD, 128 << 20);
}

} // namespace idem
