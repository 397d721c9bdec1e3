#include "idem/util/ordered_workers.hpp"

#include <doctest/doctest.h>
#include <stdexcept>
#include <thread>
#include <vector>

using idem::OrderedWorkers;

TEST_CASE("results come back in submission order, whatever order the workers finish in") {
    OrderedWorkers<int, int> pool(3, 4, [](int& job, std::size_t) {
        // Later jobs finish first.
        std::this_thread::sleep_for(std::chrono::microseconds((50 - job % 50) * 20));
        return job * 2;
    });
    std::vector<int> results;
    for (int job = 0; job < 200; ++job) {
        while (pool.full())
            if (auto done = pool.next(true)) results.push_back(done->output);
        pool.submit(job);
    }
    while (auto done = pool.next(true))
        results.push_back(done->output);
    REQUIRE(results.size() == 200);
    for (int i = 0; i < 200; ++i)
        CHECK(results[static_cast<std::size_t>(i)] == i * 2);
    CHECK(pool.empty());
}

TEST_CASE("a job's exception is rethrown when its turn comes, after the jobs before it") {
    OrderedWorkers<int, int> pool(2, 8, [](int& job, std::size_t) {
        if (job == 3) throw std::runtime_error("job 3 failed");
        return job;
    });
    for (int job = 0; job < 6; ++job)
        pool.submit(job);
    for (int expected = 0; expected < 3; ++expected)
        CHECK(pool.next(true)->output == expected);
    CHECK_THROWS_WITH_AS(pool.next(true), "job 3 failed", std::runtime_error);
    CHECK(pool.next(true)->output == 4);
}

TEST_CASE("each worker gets its own index, for per-worker state") {
    std::vector<int> used(2, 0);
    {
        OrderedWorkers<int, int> pool(2, 2, [&](int&, std::size_t worker) {
            used[worker] = 1; // each index is only touched by its own thread
            return 0;
        });
        for (int job = 0; job < 50; ++job) {
            while (pool.full())
                (void)pool.next(true);
            pool.submit(job);
        }
        while (pool.next(true)) {
        }
    }
    CHECK(used[0] + used[1] >= 1);
}

TEST_CASE("a caller that helps runs waiting jobs as its own worker, results still in order") {
    // One slow worker; the caller, waiting on the oldest job, takes the
    // ones not yet started. Each index is only touched by one thread.
    std::vector<int> ran_on(2, 0);
    std::vector<int> results;
    {
        OrderedWorkers<int, int> pool(
            1, 6,
            [&](int& job, std::size_t worker) {
                if (worker == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
                ++ran_on[worker];
                if (job == 37) throw std::runtime_error("job 37 failed");
                return job * 3;
            },
            std::size_t{1});
        for (int job = 0; job < 60; ++job) {
            while (pool.full()) {
                try {
                    if (auto done = pool.next(true)) results.push_back(done->output);
                } catch (const std::runtime_error&) {
                    results.push_back(-1);
                }
            }
            pool.submit(job);
        }
        while (true) {
            try {
                auto done = pool.next(true);
                if (!done) break;
                results.push_back(done->output);
            } catch (const std::runtime_error&) {
                results.push_back(-1);
            }
        }
    }
    REQUIRE(results.size() == 60);
    for (int i = 0; i < 60; ++i)
        CHECK(results[static_cast<std::size_t>(i)] == (i == 37 ? -1 : i * 3));
    CHECK(ran_on[0] + ran_on[1] == 60);
    CHECK(ran_on[1] > 0); // the caller judged some itself
}
