#pragma once
// Internal to the SQLite store: one thread that runs posted jobs in order.
// The store posts fingerprint_log appends to it, so the thread deciding
// claims does not wait for SQLite's B-tree work; every other use of the
// connection drains it first, so the connection is used by one thread at
// a time.

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

namespace idem::store::detail {

class SerialWorker {
public:
    SerialWorker() : m_thread([this] { run(); }) {}
    ~SerialWorker() {
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
        }
        m_wake.notify_all();
        m_thread.join();
    }
    SerialWorker(const SerialWorker&) = delete;
    SerialWorker& operator=(const SerialWorker&) = delete;

    void post(std::function<void()> job) {
        {
            std::lock_guard lock(m_mutex);
            m_jobs.push_back(std::move(job));
        }
        m_wake.notify_all();
    }

    // Waits until every posted job has run; rethrows the first failure
    // (jobs posted after a failure are dropped: their transaction is lost).
    void drain() {
        std::unique_lock lock(m_mutex);
        m_idle.wait(lock, [&] { return m_jobs.empty() && !m_busy; });
        if (m_failure) std::rethrow_exception(std::exchange(m_failure, nullptr));
    }

private:
    void run() {
        std::unique_lock lock(m_mutex);
        while (true) {
            m_wake.wait(lock, [&] { return m_stopping || !m_jobs.empty(); });
            if (m_jobs.empty()) return;
            auto job = std::move(m_jobs.front());
            m_jobs.pop_front();
            bool skip = m_failure != nullptr;
            m_busy = true;
            lock.unlock();
            std::exception_ptr failure;
            if (!skip) {
                try {
                    job();
                } catch (...) {
                    failure = std::current_exception();
                }
            }
            lock.lock();
            if (failure && !m_failure) m_failure = failure;
            m_busy = false;
            m_idle.notify_all();
        }
    }

    std::mutex m_mutex;
    std::condition_variable m_wake, m_idle;
    std::deque<std::function<void()>> m_jobs;
    bool m_busy = false;
    bool m_stopping = false;
    std::exception_ptr m_failure;
    std::thread m_thread; // last: started once the members it uses exist
};

} // namespace idem::store::detail
