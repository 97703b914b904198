// The CPU engine's fork-join pool: every index is visited exactly once per job, across many
// back-to-back jobs (the late-worker case), several pools at once, and pool sizes 1..4; chunks
// that throw; threads the system refuses. And the default thread count (usable CPUs).
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <new>
#include <numeric>
#include <thread>
#include <vector>

#include "support/child_process.h"
#include "util/cpu_count.h"
#include "util/error.h"
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

TEST_CASE("a chunk that throws: the exception reaches the caller after every chunk ended, and the pool goes on") {
    for (int threads = 1; threads <= 3; ++threads) {
        ThreadPool pool(threads);
        std::atomic<int> running{0}, after{0};
        bool caught = false;
        try {
            pool.parallel_for(1000, [&](int64_t b, int64_t e) {
                running.fetch_add(1);
                if (b <= 500 && 500 < e) {
                    running.fetch_sub(1);
                    throw std::bad_alloc();
                }
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                running.fetch_sub(1);
            });
        } catch (const std::bad_alloc &) {
            caught = true;
            after = running.load();  // no worker is still inside a chunk
        }
        CHECK(caught);
        CHECK(after.load() == 0);
        std::atomic<int64_t> sum{0};
        pool.parallel_for(100, [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) sum.fetch_add(i);
        });
        CHECK(sum.load() == 4950);
    }
}

TEST_CASE("a pool whose threads the system refuses: OUT_OF_MEMORY after joining the started ones") {
    if (test::kAddressSanitizer) {
        MESSAGE("skipped under AddressSanitizer: RLIMIT_AS cannot be applied");
        return;
    }
    const test::ChildResult r = test::run_in_child([](FILE *out) {
        const int before = test::thread_count();
        // Stacks of 8 MiB: about 4 workers fit in 40 MiB more, not 32.
        if (!test::cap_address_space(test::address_space_bytes() + (40u << 20))) return 10;
        try {
            ThreadPool pool(33);
            fprintf(out, "started %d\n", pool.size());
        } catch (const specla::Error &e) {
            fprintf(out, "status=%d threads_left=%d message=%s\n", int(e.status()), test::thread_count() - before,
                    e.what());
        }
        return 0;
    }, 60);
    INFO(r.report);
    REQUIRE(r.exited);  // a joinable std::thread destroyed by the unwinding would abort()
    REQUIRE(r.code == 0);
    CHECK(r.report.find("status=7 threads_left=0 message=n_threads 33: the system refused to start worker thread ") == 0);
}

TEST_CASE("usable CPUs: affinity, cgroup v2 cpu.max up the hierarchy, cgroup v1 CFS quota") {
    namespace fs = std::filesystem;
    const fs::path root = fs::temp_directory_path() / ("specla_cgroup_" + std::to_string(getpid()));
    auto write = [&](const fs::path &rel, const std::string &text) {
        fs::create_directories((root / rel).parent_path());
        std::ofstream(root / rel) << text;
    };
    // No cgroup files: the affinity mask decides.
    CHECK(specla::usable_cpus_from(root.string(), "0::/\n", 8) == 8);
    CHECK(specla::usable_cpus_from(root.string(), "", 0) == 1);
    // v2: the tightest quota of the cgroup and its ancestors, rounded up.
    write("a/cpu.max", "250000 100000\n");
    write("a/b/cpu.max", "max 100000\n");
    CHECK(specla::usable_cpus_from(root.string(), "0::/a/b\n", 8) == 3);
    CHECK(specla::usable_cpus_from(root.string(), "0::/a/b\n", 2) == 2);
    write("a/b/cpu.max", "50000 100000\n");
    CHECK(specla::usable_cpus_from(root.string(), "0::/a/b\n", 8) == 1);
    // v1: cpu,cpuacct mount; a quota of -1 is none; a container sees its cgroup at the mount root.
    const std::string v1 = "4:memory:/x\n3:cpu,cpuacct:/docker/abc\n0::/\n";
    write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n");
    write("cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n");
    CHECK(specla::usable_cpus_from(root.string(), v1, 16) == 16);
    write("cpu,cpuacct/docker/cpu.cfs_quota_us", "400000\n");
    write("cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
    CHECK(specla::usable_cpus_from(root.string(), v1, 16) == 4);
    write("cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "150000\n");
    CHECK(specla::usable_cpus_from(root.string(), v1, 16) == 2);
    fs::remove_all(root / "cpu,cpuacct/docker");
    write("cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
    write("cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    CHECK(specla::usable_cpus_from(root.string(), v1, 16) == 2);
    fs::remove_all(root);
    // This machine: at least one, at most what the affinity mask allows.
    CHECK(specla::usable_cpus() >= 1);
    CHECK(specla::usable_cpus() <= int(std::thread::hardware_concurrency()));
}

namespace {

// Runs `passes` passes of one kind, each one job over 64 indices whose chunks take `chunk_time`
// (given the chunk and whether a worker runs it). Returns how many passes ran inline (the caller
// ran the whole range as one chunk).
template <typename ChunkTime>
int run_passes(ThreadPool &pool, int passes, ChunkTime chunk_time) {
    const std::thread::id caller = std::this_thread::get_id();
    int inline_passes = 0;
    for (int p = 0; p < passes; ++p) {
        const ThreadPool::PassScope pass(pool, 7);
        std::atomic<bool> whole{false};
        pool.parallel_for(64, [&](int64_t b, int64_t e) {
            if (b == 0 && e == 64) whole = true;
            std::this_thread::sleep_for(chunk_time(e - b, std::this_thread::get_id() != caller));
        });
        inline_passes += whole.load();
    }
    return inline_passes;
}

using std::chrono::microseconds;

// A worker that takes long for its chunk: what a worker preempted by another process costs.
microseconds slow_worker(int64_t, bool on_worker) { return microseconds(on_worker ? 3000 : 0); }
// Work that the second thread halves.
microseconds even_work(int64_t chunk, bool) { return microseconds(150 * chunk); }

}  // namespace

TEST_CASE("a pass that waits for a slow worker runs inline; one the workers speed up stays parallel") {
    ThreadPool pool(2);
    CHECK_FALSE(pool.runs_inline(7));
    // Probes: after 4 passes, then at growing intervals.
    const int slow_inline = run_passes(pool, 60, slow_worker);
    MESSAGE("slow worker: ", slow_inline, " of 60 passes inline");
    CHECK(pool.runs_inline(7));
    CHECK(slow_inline >= 45);
    // The worker recovers: the next probe of the parallel form (within 64 passes) measures it
    // faster, and parallel passes stay.
    const int even_inline = run_passes(pool, 100, even_work);
    MESSAGE("even work afterwards: ", even_inline, " of 100 passes inline");
    CHECK(even_inline <= 80);
    // Settled: the probes cost a pass in up to 64. (Not none: other processes busy on the
    // machine that runs the tests can make a parallel pass slow, and that is what the pool is for.)
    const int settled_inline = run_passes(pool, 60, even_work);
    MESSAGE("even work, settled: ", settled_inline, " of 60 passes inline");
    CHECK(settled_inline <= 20);
}

TEST_CASE("jobs outside a pass and pools of one thread are not timed") {
    ThreadPool one(1);
    { const ThreadPool::PassScope pass(one, 3); }
    CHECK_FALSE(one.runs_inline(3));
    ThreadPool two(2);
    std::atomic<int> calls{0};
    two.parallel_for(64, [&](int64_t, int64_t) { ++calls; });
    CHECK(calls.load() > 1);  // split into chunks as before
}
