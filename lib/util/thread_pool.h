// A small fork-join pool for the CPU engine: the calling thread and n-1 workers split a range
// into chunks and claim them from a shared counter, so a worker that the OS has not scheduled
// yet costs nothing (the others take its chunks) and an oversubscribed machine degrades to
// single-thread speed rather than stalling at every join. Workers spin briefly between jobs (a
// forward pass issues them back to back) and then sleep. Each CPU session owns one pool:
// sessions on different threads never share workers.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace specla {

class ThreadPool {
public:
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return int(workers_.size()) + 1; }

    // fn(begin, end) over disjoint chunks covering [0, n); the chunks' results must not depend
    // on which thread runs them. Runs inline when the pool has one thread. Not reentrant.
    template <typename Fn>
    void parallel_for(int64_t n, Fn &&fn) {
        if (n <= 0) return;
        if (workers_.empty() || n == 1) {
            fn(int64_t(0), n);
            return;
        }
        using F = std::remove_reference_t<Fn>;
        auto trampoline = [](void *ctx, int64_t b, int64_t e) { (*static_cast<F *>(ctx))(b, e); };
        run(n, trampoline, const_cast<void *>(static_cast<const void *>(&fn)));
    }

private:
    using Task = void (*)(void *, int64_t, int64_t);
    void run(int64_t n, Task task, void *ctx);
    void worker_loop();
    // Claim and run chunks of job `gen` until none is left.
    void work_on(uint32_t gen);

    std::vector<std::thread> workers_;
    // The job's claim word: generation (32 bits) | chunk count (16) | next chunk (16). A claim
    // succeeds only while the word still names the job, so a late worker never runs a chunk of a
    // job it did not see start; the job cannot finish (and be replaced) while a claimed chunk runs.
    std::atomic<uint64_t> claim_{0};
    std::atomic<uint32_t> generation_{0};
    std::atomic<int> done_chunks_{0};
    std::atomic<bool> stop_{false};
    Task task_ = nullptr;
    void *ctx_ = nullptr;
    int64_t n_ = 0;
    std::mutex mutex_;
    std::condition_variable wake_;
};

}  // namespace specla
