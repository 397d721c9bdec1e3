#include "idem/run/read_ahead.hpp"

#include <algorithm>
#include <utility>

namespace idem::run {

ReadAhead::ReadAhead(InputStream& input, std::size_t target_bytes, std::size_t depth)
    : m_input(input), m_target_bytes(target_bytes), m_depth(std::max<std::size_t>(depth, 1)),
      m_reader([this](const std::stop_token& stop) { read_all(stop); }) {}

ReadAhead::~ReadAhead() {
    m_reader.request_stop();
    m_changed.notify_all();
}

void ReadAhead::read_all(const std::stop_token& stop) {
    while (!stop.stop_requested()) {
        InputBlock block;
        {
            std::unique_lock lock(m_mutex);
            if (!m_spare.empty()) {
                block = std::move(m_spare.back());
                m_spare.pop_back();
            }
        }
        bool got = false;
        try {
            got = m_input.next_block(block, m_target_bytes);
        } catch (...) {
            std::lock_guard lock(m_mutex);
            m_error = std::current_exception();
        }
        std::unique_lock lock(m_mutex);
        if (!got) {
            m_done = true;
            m_changed.notify_all();
            return;
        }
        m_changed.wait(lock, stop, [&] { return m_ready.size() < m_depth; });
        if (stop.stop_requested()) return;
        m_ready.push_back(std::move(block));
        m_changed.notify_all();
    }
}

bool ReadAhead::next(InputBlock& block) {
    std::unique_lock lock(m_mutex);
    m_changed.wait(lock, [&] { return !m_ready.empty() || m_done; });
    if (m_ready.empty()) {
        if (m_error) std::rethrow_exception(std::exchange(m_error, nullptr));
        return false;
    }
    block = std::move(m_ready.front());
    m_ready.pop_front();
    m_changed.notify_all();
    return true;
}

void ReadAhead::recycle(InputBlock&& block) {
    std::lock_guard lock(m_mutex);
    m_spare.push_back(std::move(block));
}

} // namespace idem::run
