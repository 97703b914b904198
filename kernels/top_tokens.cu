#include <math.h>

#include "device_common.cuh"
#include "top_tokens.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kTopThreads = 256;

// The block's maximum of one u64 per thread (every thread gets it).
__device__ unsigned long long block_max_u64(unsigned long long v, unsigned long long *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_max_u64(v);
    __syncthreads();  // red is free (an earlier call's readers are done)
    if (lane == 0) red[warp] = v;
    __syncthreads();
    v = lane < kTopThreads / 32 ? red[lane] : 0ull;
    return warp_max_u64(v);
}

// One CTA per row. The i-th token is the maximum key below the (i-1)-th's: k scans of the row,
// each a block reduction. k is small in practice (a tree's top_k, 4 by default) and a row of
// 32000 floats is a few microseconds per scan from L2; a per-thread candidate list would save
// scans but not the launch, which dominates at k = 4.
__global__ void __launch_bounds__(kTopThreads) top_tokens_kernel(const float *logits, int64_t ld, int32_t n,
                                                                 int32_t k, int32_t *ids, float *logp) {
    __shared__ unsigned long long red[kTopThreads / 32];
    __shared__ float fred[32];  // block_sum's scratch
    __shared__ unsigned long long picked[kMaxTopTokens];
    const float *row = logits + int64_t(blockIdx.x) * ld;
    unsigned long long below = ~0ull;
    for (int32_t r = 0; r < k; ++r) {
        unsigned long long best = 0;
        for (int32_t i = threadIdx.x; i < n; i += kTopThreads) {
            const unsigned long long key = argmax_key(row[i], uint32_t(i));
            if (key < below) best = u64_max(best, key);
        }
        best = block_max_u64(best, red);
        if (threadIdx.x == 0) picked[r] = best;
        below = best;
    }
    __syncthreads();  // picked[] complete
    // log-sum-exp over the candidates, the maximum (the first pick) taken out.
    const float mx = n > 0 ? row[~uint32_t(picked[0] & 0xffffffffull)] : -INFINITY;
    float s = 0.f;
    if (isfinite(mx))
        for (int32_t i = threadIdx.x; i < n; i += kTopThreads) s += expf(row[i] - mx);
    s = block_sum(s, fred);
    const float lse = mx + logf(s);
    for (int32_t r = threadIdx.x; r < k; r += kTopThreads) {
        const int64_t at = int64_t(blockIdx.x) * k + r;
        if (r >= n) {
            ids[at] = -1;
            logp[at] = -INFINITY;
            continue;
        }
        const int32_t id = int32_t(~uint32_t(picked[r] & 0xffffffffull));
        const bool zero = row[id] == -INFINITY;  // probability 0: not a token to draft
        ids[at] = zero ? -1 : id;
        logp[at] = zero ? -INFINITY : row[id] - lse;
    }
}

}  // namespace

cudaError_t launch_top_tokens(const float *logits, int64_t ld, int32_t rows, int32_t n_candidates, int32_t k,
                              int32_t *ids, float *logp, cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    if (k < 1 || k > kMaxTopTokens || n_candidates < 0 || ld < n_candidates) return cudaErrorInvalidValue;
    top_tokens_kernel<<<rows, kTopThreads, 0, stream>>>(logits, ld, n_candidates, k, ids, logp);
    return cudaGetLastError();
}

}  // namespace kern
}  // namespace specla
