#pragma once
// Runs jobs on a few worker threads and hands their results back in the
// order the jobs were submitted, so a pipeline can parallelise per-record
// work and still write its output in input order. At most `max_in_flight`
// jobs exist at once, which bounds memory whatever the input length.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace idem {

template <typename Job, typename Output> class OrderedWorkers {
public:
    // `work(job, worker_index)` runs on worker `worker_index` (0-based), so
    // callers can keep one non-thread-safe state object per worker.
    using Work = std::function<Output(Job&, std::size_t)>;

    struct Finished {
        Job job;
        Output output;
    };

    // With `caller_index`, the thread that calls next(true) does not only
    // wait: while the oldest job is unfinished and another has not started,
    // it runs that one itself as worker `caller_index` (a state of its own).
    // For a caller that is a core's work of its own but idles while the
    // workers catch up (an ordered stage judging every record).
    OrderedWorkers(std::size_t threads, std::size_t max_in_flight, Work work,
                   std::optional<std::size_t> caller_index = std::nullopt)
        : m_work(std::move(work)),
          m_max_in_flight(max_in_flight < threads ? threads : max_in_flight),
          m_caller_index(caller_index) {
        for (std::size_t i = 0; i < threads; ++i)
            m_threads.emplace_back([this, i] { run_worker(i); });
    }

    ~OrderedWorkers() {
        {
            std::lock_guard lock(m_mutex);
            m_stopping = true;
        }
        m_work_ready.notify_all();
        for (auto& thread : m_threads)
            thread.join();
    }

    OrderedWorkers(const OrderedWorkers&) = delete;
    OrderedWorkers& operator=(const OrderedWorkers&) = delete;

    [[nodiscard]] bool full() const {
        std::lock_guard lock(m_mutex);
        return m_slots.size() >= m_max_in_flight;
    }
    [[nodiscard]] bool empty() const {
        std::lock_guard lock(m_mutex);
        return m_slots.empty();
    }

    void submit(Job job) {
        auto slot = std::make_shared<Slot>();
        slot->job = std::move(job);
        {
            std::lock_guard lock(m_mutex);
            m_slots.push_back(slot);
            m_pending.push_back(slot);
        }
        m_work_ready.notify_one();
    }

    // The oldest job's result once it is done (waiting for it when `wait`),
    // or nullopt when nothing is pending or, without `wait`, not yet done.
    // Rethrows what the work threw, in order.
    std::optional<Finished> next(bool wait) {
        std::unique_lock lock(m_mutex);
        if (m_slots.empty()) return std::nullopt;
        auto slot = m_slots.front();
        if (wait) {
            while (m_caller_index && !slot->done && !m_pending.empty()) {
                auto helped = m_pending.front();
                m_pending.pop_front();
                lock.unlock();
                work_on(*helped, *m_caller_index);
                lock.lock();
                helped->done = true;
            }
            m_done.wait(lock, [&] { return slot->done; });
        } else if (!slot->done) {
            return std::nullopt;
        }
        m_slots.pop_front();
        lock.unlock();
        if (slot->error) std::rethrow_exception(slot->error);
        return Finished{std::move(slot->job), std::move(*slot->output)};
    }

private:
    struct Slot {
        Job job;
        std::optional<Output> output;
        std::exception_ptr error;
        bool done = false;
    };

    // Outside the lock: the slot is this thread's until it is marked done.
    void work_on(Slot& slot, std::size_t index) {
        try {
            slot.output.emplace(m_work(slot.job, index));
        } catch (...) {
            slot.error = std::current_exception();
        }
    }

    void run_worker(std::size_t index) {
        while (true) {
            std::shared_ptr<Slot> slot;
            {
                std::unique_lock lock(m_mutex);
                m_work_ready.wait(lock, [&] { return m_stopping || !m_pending.empty(); });
                if (m_pending.empty()) return;
                slot = m_pending.front();
                m_pending.pop_front();
            }
            work_on(*slot, index);
            {
                std::lock_guard lock(m_mutex);
                slot->done = true;
                // The worker's reference goes while the lock is held: the
                // slot, and the exception it may hold, are then destroyed
                // by whoever takes the result, never here after the
                // hand-off (ThreadSanitizer saw a worker free an exception
                // the caller had just read, a release it cannot see
                // ordered through libstdc++'s own counting).
                slot.reset();
            }
            m_done.notify_all();
        }
    }

    Work m_work;
    std::size_t m_max_in_flight;
    std::optional<std::size_t> m_caller_index;
    mutable std::mutex m_mutex;
    std::condition_variable m_work_ready;
    std::condition_variable m_done;
    std::deque<std::shared_ptr<Slot>> m_slots;   // submission order
    std::deque<std::shared_ptr<Slot>> m_pending; // not yet started
    bool m_stopping = false;
    std::vector<std::thread> m_threads;
};

} // namespace idem
