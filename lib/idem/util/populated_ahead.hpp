#pragma once
// Pages of a growing array mapped ahead of where it is written, on a
// thread of its own (util/huge_pages.hpp says what a first touch costs).
//
// A table that appends millions of entries one by one on a run's ordered
// stage (dedup's fingerprints) otherwise takes each huge page's fault, and
// the kernel's zeroing of it, on that one thread, which every worker waits
// for. Measured on a 10M-fingerprint dedup (480 MB of entries; farm-bench,
// six interleaved against the build before): 0.94 of its wall time
// (0.82–1.10), the zeroing's processor time unchanged but off that thread;
// mapping a stretch at a time on the ordered stage itself saved nothing.
// The memory held is what is written plus one window, not the array's
// reservation.

#include "idem/util/huge_pages.hpp"

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <thread>

namespace idem {

// Asks the kernel to map [data, data + bytes) writable now, in one call
// (MADV_POPULATE_WRITE); the contents are not touched. False where it
// cannot (before Linux 5.14): the pages then fault in as they are written.
bool populate_pages(void* data, std::size_t bytes) noexcept;

class PopulatedAhead {
public:
    // Keeps up to `window_bytes` past the array's end mapped.
    explicit PopulatedAhead(std::size_t window_bytes = std::size_t{64} << 20);
    // Stops the thread and waits for it: before the array is freed.
    ~PopulatedAhead();
    PopulatedAhead(const PopulatedAhead&) = delete;
    PopulatedAhead& operator=(const PopulatedAhead&) = delete;

    // After an append: `vector` is written up to its size. Between two
    // windows' quarters it is two comparisons; an array below
    // k_huge_from_bytes (the heap's) is left alone.
    template <typename T> void written(HugeVector<T>& vector) {
        auto* data = reinterpret_cast<char*>(vector.data());
        auto used = vector.size() * sizeof(T);
        if (data == m_seen_data && used < m_next_report) return;
        report(data, used, vector.capacity() * sizeof(T));
    }
    // Before the array moves (it grows) and its old pages are freed: no
    // stretch of it is being mapped once this returns.
    void before_move();
    // Until the window past the last reported end is mapped (tests).
    void wait_caught_up();

private:
    void report(char* data, std::size_t used, std::size_t capacity);
    [[nodiscard]] std::size_t due_until() const; // under m_mutex
    void run();

    const std::size_t m_window;
    // The owner's own: when written() next reports.
    const char* m_seen_data = nullptr;
    std::size_t m_next_report = 0;

    std::mutex m_mutex;
    std::condition_variable m_wake;   // work is due, or stop
    std::condition_variable m_change; // a stretch was mapped
    char* m_data = nullptr;           // null: nothing to map
    std::size_t m_used = 0, m_capacity = 0;
    std::size_t m_mapped = 0; // bytes of m_data mapped from its start
    bool m_busy = false;      // mapping a stretch of m_data, unlocked
    bool m_stop = false;
    std::thread m_thread; // started with the first array worth it
};

} // namespace idem
