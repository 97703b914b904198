#include "util/thread_pool.h"

#include <algorithm>
#include <exception>

#include "util/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define SPECLA_PAUSE() _mm_pause()
#else
#define SPECLA_PAUSE() std::this_thread::yield()
#endif

namespace specla {
namespace {
// Spin iterations before a worker sleeps: long enough to bridge the gap between two jobs of
// one forward pass (microseconds), short enough not to hold a core when the session is idle.
constexpr int kSpinIterations = 1 << 14;
// Spin iterations before the caller sleeps at the join (tens of microseconds): a join on a
// running worker ends within a chunk's time; one that takes longer waits for a worker that the
// OS took off its core, and sleeping frees this core for it.
constexpr int kJoinSpinIterations = 1 << 11;
constexpr int kChunksPerThread = 4;
// Pass timing: the first probe comes after a few passes (the first ones warm caches); a probe
// that confirms the mode doubles the interval up to kMaxProbeInterval (a decoding step on the
// shipped model is about 5-10 ms, so a change of load is noticed within about a second), one that
// changes it starts again from kMinProbeInterval. A probe costs at most the difference between
// the two ways for one pass in kMaxProbeInterval once the mode is settled.
constexpr uint32_t kMinProbeInterval = 4;
constexpr uint32_t kMaxProbeInterval = 64;
// The other way must be this much faster to take over: timings on a busy machine are noisy.
constexpr double kSwitchMargin = 0.9;
// Weight of a new timing in a kind's running mean.
constexpr double kNewWeight = 0.25;

uint32_t claim_gen(uint64_t w) { return uint32_t(w >> 32); }
uint32_t claim_total(uint64_t w) { return uint32_t(w >> 16) & 0xffffu; }
uint32_t claim_next(uint64_t w) { return uint32_t(w) & 0xffffu; }
}  // namespace

ThreadPool::ThreadPool(int n_threads) {
    workers_.reserve(size_t(std::max(n_threads - 1, 0)));
    try {
        for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this] { worker_loop(); });
    } catch (const std::exception &e) {  // std::system_error (EAGAIN), or bad_alloc for its state
        const int started = int(workers_.size());
        stop_workers();
        fail(SPECLA_ERR_OUT_OF_MEMORY, "n_threads ", n_threads, ": the system refused to start worker thread ",
             started + 1, " of ", n_threads - 1, " (", e.what(), ")");
    }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_.store(true);
        generation_.fetch_add(1);
    }
    wake_.notify_all();
    for (auto &t : workers_) t.join();
    workers_.clear();
}

void ThreadPool::finish_chunk(uint32_t chunks) {
    // seq_cst pairs with wait_for_chunks: either the caller sees the count or this thread sees
    // that the caller is asleep.
    if (done_chunks_.fetch_add(1) + 1 != chunks) return;
    if (caller_sleeping_.load()) {
        { std::lock_guard<std::mutex> lock(join_mutex_); }
        joined_.notify_one();
    }
}

void ThreadPool::work_on(uint32_t gen) {
    for (;;) {
        uint64_t w = claim_.load(std::memory_order_acquire);
        if (claim_gen(w) != gen || claim_next(w) >= claim_total(w)) return;
        if (!claim_.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel)) continue;
        const int64_t chunks = claim_total(w), c = claim_next(w);
        const int64_t b = n_ * c / chunks, e = n_ * (c + 1) / chunks;
        if (b < e && !failed_.load(std::memory_order_relaxed)) {
            try {
                task_(ctx_, b, e);
            } catch (...) {
                std::lock_guard<std::mutex> lock(error_mutex_);
                if (!error_) error_ = std::current_exception();
                failed_.store(true, std::memory_order_relaxed);
            }
        }
        finish_chunk(uint32_t(chunks));
    }
}

void ThreadPool::wait_for_chunks(uint32_t chunks) {
    for (int spins = 0; spins < kJoinSpinIterations; ++spins) {
        if (done_chunks_.load(std::memory_order_acquire) == chunks) return;
        SPECLA_PAUSE();
    }
    std::unique_lock<std::mutex> lock(join_mutex_);
    caller_sleeping_.store(true);
    joined_.wait(lock, [&] { return done_chunks_.load() == chunks; });
    caller_sleeping_.store(false);
}

void ThreadPool::run(int64_t n, Task task, void *ctx) {
    const uint32_t chunks = uint32_t(std::min<int64_t>(n, int64_t(size()) * kChunksPerThread));
    const uint32_t gen = generation_.load(std::memory_order_relaxed) + 1;
    task_ = task, ctx_ = ctx, n_ = n;
    done_chunks_.store(0, std::memory_order_relaxed);
    claim_.store((uint64_t(gen) << 32) | (uint64_t(chunks) << 16), std::memory_order_release);
    {
        std::lock_guard<std::mutex> lock(mutex_);  // pairs with the sleeping workers' wait
        generation_.store(gen, std::memory_order_release);
    }
    wake_.notify_all();
    work_on(gen);
    wait_for_chunks(chunks);
    if (failed_.load(std::memory_order_relaxed)) {
        std::exception_ptr error;
        {
            std::lock_guard<std::mutex> lock(error_mutex_);
            std::swap(error, error_);
        }
        failed_.store(false, std::memory_order_relaxed);
        std::rethrow_exception(error);
    }
}

ThreadPool::PassStats &ThreadPool::stats_for(int64_t kind) {
    PassStats *oldest = &pass_stats_[0];
    for (PassStats &s : pass_stats_) {
        if (s.kind == kind) return s;
        if (s.last_used < oldest->last_used) oldest = &s;
    }
    *oldest = PassStats{};  // a new kind replaces the one unused for longest
    oldest->kind = kind;
    oldest->until_probe = oldest->probe_interval = kMinProbeInterval;
    return *oldest;
}

bool ThreadPool::runs_inline(int64_t kind) const {
    for (const PassStats &s : pass_stats_)
        if (s.kind == kind) return s.inline_mode;
    return false;
}

void ThreadPool::begin_pass(int64_t kind) {
    if (workers_.empty()) return;
    PassStats &s = stats_for(kind);
    s.last_used = ++passes_;
    probing_ = --s.until_probe == 0;
    inline_pass_ = s.inline_mode != probing_;
    pass_ = &s;
    pass_start_ = Clock::now();
}

void ThreadPool::end_pass(bool completed) {
    PassStats *s = pass_;
    const bool was_inline = inline_pass_;
    pass_ = nullptr;
    inline_pass_ = false;
    if (!s) return;
    if (!completed) {  // an exception cut the pass short: its time says nothing
        if (probing_) s->until_probe = 1;
        return;
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - pass_start_).count();
    double &mean = s->seconds[was_inline ? 1 : 0];
    // A probe's timing replaces its way's mean, which dates from before the last switch or probe
    // (the load may have changed since); a probe that misled is corrected kMinProbeInterval
    // passes later.
    mean = mean == 0 || probing_ ? seconds : (1 - kNewWeight) * mean + kNewWeight * seconds;
    if (!probing_) return;
    const double current = s->seconds[s->inline_mode ? 1 : 0];
    if (current == 0) {  // the mode's own way is not measured yet: measure it next
        s->until_probe = 1;
        s->inline_mode = was_inline;
        return;
    }
    if (mean < kSwitchMargin * current) {
        s->inline_mode = was_inline;
        s->probe_interval = kMinProbeInterval;
    } else {
        s->probe_interval = std::min(s->probe_interval * 2, kMaxProbeInterval);
    }
    s->until_probe = s->probe_interval;
}

void ThreadPool::worker_loop() {
    uint32_t seen = 0;
    for (;;) {
        int spins = 0;
        uint32_t g;
        while ((g = generation_.load(std::memory_order_acquire)) == seen) {
            if (++spins < kSpinIterations) {
                SPECLA_PAUSE();
                continue;
            }
            std::unique_lock<std::mutex> lock(mutex_);
            wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
        }
        seen = g;
        if (stop_.load()) return;
        work_on(g);
    }
}

}  // namespace specla
