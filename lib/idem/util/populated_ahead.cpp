#include "idem/util/populated_ahead.hpp"

#include <algorithm>

#include <sys/mman.h>

namespace idem {

bool populate_pages(void* data, std::size_t bytes) noexcept {
    return ::madvise(data, bytes, MADV_POPULATE_WRITE) == 0;
}

PopulatedAhead::PopulatedAhead(std::size_t window_bytes)
    : m_window(std::max(window_bytes, k_huge_page_bytes)) {}

PopulatedAhead::~PopulatedAhead() {
    {
        std::lock_guard lock(m_mutex);
        m_stop = true;
    }
    m_wake.notify_one();
    if (m_thread.joinable()) m_thread.join();
}

std::size_t PopulatedAhead::due_until() const {
    if (m_data == nullptr) return 0;
    return std::min(m_capacity, m_used + m_window);
}

void PopulatedAhead::report(char* data, std::size_t used, std::size_t capacity) {
    m_seen_data = data;
    m_next_report = used + m_window / 4;
    if (capacity < k_huge_from_bytes) return;
    {
        std::lock_guard lock(m_mutex);
        if (data != m_data) {
            m_data = data;
            m_mapped = used; // what was copied in is mapped already
        }
        m_used = used;
        m_capacity = capacity;
        if (!m_thread.joinable()) m_thread = std::thread([this] { run(); });
    }
    m_wake.notify_one();
}

void PopulatedAhead::before_move() {
    std::unique_lock lock(m_mutex);
    m_data = nullptr;
    m_seen_data = nullptr;
    m_change.wait(lock, [&] { return !m_busy; });
}

void PopulatedAhead::wait_caught_up() {
    std::unique_lock lock(m_mutex);
    m_change.wait(lock, [&] { return !m_busy && (m_data == nullptr || m_mapped >= due_until()); });
}

void PopulatedAhead::run() {
    std::unique_lock lock(m_mutex);
    for (;;) {
        m_wake.wait(lock, [&] { return m_stop || m_mapped < due_until(); });
        if (m_stop) return;
        auto* data = m_data;
        auto from = m_mapped / k_small_page_bytes * k_small_page_bytes; // its page's start
        auto to = due_until();
        m_busy = true;
        lock.unlock();
        (void)populate_pages(data + from, to - from);
        lock.lock();
        m_busy = false;
        if (m_data == data) m_mapped = to;
        m_change.notify_all();
    }
}

} // namespace idem
