// A grid-wide barrier for persistent kernels whose CTAs are all resident (cooperative launch): the
// persistent decoding step (decode_step.cu) and the skeleton of bench_step_floor. Device code only.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

namespace specla {
namespace kern {

// One thread of each CTA arrives on `count` and waits until it has reached `target` (the counter
// only grows: barrier n of a launch waits for base + n * gridDim.x). The release add publishes the
// CTA's writes, which a CTA barrier has ordered before it; the acquire load makes the other CTAs'
// visible to this one, and a CTA barrier after the call to the rest of the CTA. A wait longer than
// `limit` clock cycles is a bug, not a wait: on_timeout(value seen) is called (it should trap).
template <typename OnTimeout>
__device__ __forceinline__ void grid_arrive_wait(unsigned int *count, unsigned int target, long long limit,
                                                 OnTimeout &&on_timeout) {
    asm volatile("red.release.gpu.global.add.u32 [%0], 1;" ::"l"(count) : "memory");
    const long long t0 = clock64();
    unsigned int v;
    for (;;) {
        asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(count) : "memory");
        if (int(v - target) >= 0) break;  // wrap-safe
        if (clock64() - t0 > limit) on_timeout(v);
    }
}

// Named CTA barrier 1 over the first `Threads` threads of the CTA (barrier 0 is __syncthreads):
// the consumer warps of a persistent kernel, whose producer warp never joins.
template <int Threads>
__device__ __forceinline__ void named_barrier_sync() {
    asm volatile("barrier.sync 1, %0;" ::"n"(Threads) : "memory");
}

// The grid barrier as a CTA's `Threads` consumer threads pass it: their writes are ordered before
// thread 0's arrival, thread 0 waits for the grid (target advances by gridDim.x per barrier), and
// the second CTA barrier hands the grid's writes to the rest. Warp 0 reconverges before that
// barrier, so that no lane reaches it while thread 0 still spins.
template <int Threads, typename OnTimeout>
__device__ __forceinline__ void cta_grid_sync(unsigned int *count, unsigned int &target, long long limit,
                                              OnTimeout &&on_timeout) {
    named_barrier_sync<Threads>();
    target += gridDim.x;
    if (threadIdx.x < 32) {
        if (threadIdx.x == 0) grid_arrive_wait(count, target, limit, on_timeout);
        __syncwarp();
    }
    named_barrier_sync<Threads>();
}

}  // namespace kern
}  // namespace specla
