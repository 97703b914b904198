// The CPU engine's fork-join pool: every index is visited exactly once per job, across many
// back-to-back jobs (the late-worker case), several pools at once, and pool sizes 1..4.
#include <doctest/doctest.h>

#include <atomic>
#include <numeric>
#include <thread>
#include <vector>

#include "util/thread_pool.h"

using specla::ThreadPool;

TEST_CASE("thread pool covers every index exactly once per job") {
    for (int threads = 1; threads <= 4; ++threads) {
        ThreadPool pool(threads);
        CHECK(pool.size() == threads);
        for (int64_t n : {1, 2, 3, 7, 64, 1000, 100003}) {
            std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
            for (int job = 0; job < 20; ++job)
                pool.parallel_for(n, [&](int64_t b, int64_t e) {
                    REQUIRE(b < e);
                    for (int64_t i = b; i < e; ++i) hits[size_t(i)].fetch_add(1);
                });
            int bad = 0;
            for (auto &h : hits) bad += h.load() != 20;
            CHECK(bad == 0);
        }
    }
}

TEST_CASE("thread pools of concurrent sessions do not interfere") {
    std::vector<std::thread> users;
    std::atomic<int> failures{0};
    for (int u = 0; u < 3; ++u)
        users.emplace_back([&, u] {
            ThreadPool pool(2);
            for (int job = 0; job < 2000; ++job) {
                const int64_t n = 17 + (job * 7 + u) % 300;
                std::atomic<int64_t> sum{0};
                pool.parallel_for(n, [&](int64_t b, int64_t e) {
                    int64_t s = 0;
                    for (int64_t i = b; i < e; ++i) s += i;
                    sum.fetch_add(s);
                });
                if (sum.load() != n * (n - 1) / 2) failures.fetch_add(1);
            }
        });
    for (auto &t : users) t.join();
    CHECK(failures.load() == 0);
}
