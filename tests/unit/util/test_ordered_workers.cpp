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
