// A small fork-join pool for the CPU engine: the calling thread and n-1 workers split a range
// into chunks and claim them from a shared counter, so a worker that the OS has not scheduled
// yet costs nothing (the others take its chunks). Workers spin briefly between jobs (a forward
// pass issues them back to back) and then sleep. The caller spins briefly at the join and then
// sleeps too: a worker preempted inside a chunk (another process busy on its core) is then
// moved by the scheduler to the core the caller left idle, instead of waiting a time slice
// behind the other process. Each CPU session owns one pool: sessions on different threads never
// share workers.
//
// A worker preempted inside a chunk it claimed still holds the join until the OS runs it again
// (the caller cannot take a chunk over once it started), and on a machine where another process
// is busy that is most joins: two threads then decode slower than one. So the pool also times
// whole passes (PassScope: one forward pass of the CPU backend) and runs a kind of pass inline on
// the calling thread while that measures faster, re-trying the other way now and then.
//
// Which thread runs a chunk never changes what it computes: each output is produced by one chunk,
// and chunk boundaries depend only on n and the pool size; a pass run inline computes each output
// exactly as a pool of one thread does.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace specla {

class ThreadPool {
public:
    // Starts n_threads - 1 workers. A thread the system refuses to start is SPECLA_ERR_OUT_OF_MEMORY
    // (specla::Error) after the workers already started have been stopped and joined.
    explicit ThreadPool(int n_threads);
    ~ThreadPool();
    ThreadPool(const ThreadPool &) = delete;
    ThreadPool &operator=(const ThreadPool &) = delete;

    int size() const { return int(workers_.size()) + 1; }

    // fn(begin, end) over disjoint chunks covering [0, n); the chunks' results must not depend
    // on which thread runs them. Runs inline when the pool has one thread. Not reentrant. If a
    // chunk throws, the remaining chunks still run (or are skipped) before the first exception is
    // rethrown to the caller, so no worker is still inside fn when parallel_for returns.
    template <typename Fn>
    void parallel_for(int64_t n, Fn &&fn) {
        if (n <= 0) return;
        if (workers_.empty() || n == 1 || inline_pass_) {
            fn(int64_t(0), n);
            return;
        }
        using F = std::remove_reference_t<Fn>;
        auto trampoline = [](void *ctx, int64_t b, int64_t e) { (*static_cast<F *>(ctx))(b, e); };
        run(n, trampoline, const_cast<void *>(static_cast<const void *>(&fn)));
    }

    // One pass of jobs (passes of one `kind` do the same work: the CPU backend uses its node
    // count): the pool chooses for the whole pass whether its jobs run on the workers or inline,
    // and times it. Not nested; an exception leaves the pass untimed.
    class PassScope {
    public:
        PassScope(ThreadPool &pool, int64_t kind) : pool_(pool) { pool_.begin_pass(kind); }
        ~PassScope() { pool_.end_pass(std::uncaught_exceptions() == exceptions_); }
        PassScope(const PassScope &) = delete;
        PassScope &operator=(const PassScope &) = delete;

    private:
        ThreadPool &pool_;
        int exceptions_ = std::uncaught_exceptions();
    };

    // Whether passes of `kind` now run inline (for tests and diagnostics).
    bool runs_inline(int64_t kind) const;

private:
    using Clock = std::chrono::steady_clock;
    // What the pool has measured for one kind of pass.
    struct PassStats {
        int64_t kind = -1;  // -1: a free slot
        uint64_t last_used = 0;
        bool inline_mode = false;  // how passes of this kind run between probes
        double seconds[2] = {0, 0};  // running mean per way [parallel, inline]; 0: not measured
        uint32_t until_probe = 0;  // passes before the next one is run the other way
        uint32_t probe_interval = 0;
    };
    void begin_pass(int64_t kind);
    void end_pass(bool completed);
    PassStats &stats_for(int64_t kind);

    using Task = void (*)(void *, int64_t, int64_t);
    void run(int64_t n, Task task, void *ctx);
    void worker_loop();
    // Claim and run chunks of job `gen` until none is left.
    void work_on(uint32_t gen);
    void finish_chunk(uint32_t chunks);
    void wait_for_chunks(uint32_t chunks);
    void stop_workers() noexcept;

    std::vector<std::thread> workers_;
    // The job's claim word: generation (32 bits) | chunk count (16) | next chunk (16). A claim
    // succeeds only while the word still names the job, so a late worker never runs a chunk of a
    // job it did not see start; the job cannot finish (and be replaced) while a claimed chunk runs.
    std::atomic<uint64_t> claim_{0};
    std::atomic<uint32_t> generation_{0};
    std::atomic<uint32_t> done_chunks_{0};
    std::atomic<bool> stop_{false};
    Task task_ = nullptr;
    void *ctx_ = nullptr;
    int64_t n_ = 0;
    // The first exception a chunk of the current job threw (guarded by error_mutex_).
    std::exception_ptr error_;
    std::atomic<bool> failed_{false};
    std::mutex error_mutex_;
    // Sleeping workers wait on wake_ for a new generation.
    std::mutex mutex_;
    std::condition_variable wake_;
    // A caller that stopped spinning at the join waits on joined_ until the last chunk is done.
    std::atomic<bool> caller_sleeping_{false};
    std::mutex join_mutex_;
    std::condition_variable joined_;

    // Pass timing (only the thread that owns the pool touches it).
    std::array<PassStats, 8> pass_stats_{};
    uint64_t passes_ = 0;
    PassStats *pass_ = nullptr;  // the pass under way
    bool inline_pass_ = false;   // its jobs run on the caller
    bool probing_ = false;       // it runs the other way than its kind's mode
    Clock::time_point pass_start_{};
};

}  // namespace specla
