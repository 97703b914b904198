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

// The row's k picks (keys, most probable first) as ids and log-probabilities: entries past the
// candidates, and those of probability 0, as id -1 and -inf.
__device__ void write_picks(const float *row, const unsigned long long *picked, int32_t n, int32_t k, float lse,
                            int32_t *ids, float *logp) {
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

// One CTA per row. The i-th token is the maximum key below the (i-1)-th's: k scans of the row,
// each a block reduction, and one more for the softmax sum: the general form, for k above
// kFewTopTokens (below it, top_few_tokens_kernel reads the row once).
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
    write_picks(row, picked, n, k, lse, ids, logp);
}

// The same result for k <= kFewTopTokens in one read of the row: each thread keeps the best
// kFewTopTokens keys of its entries in registers and a running softmax sum (rescaled when its
// maximum grows), each warp merges its lanes' lists in k rounds of warp maxima, warp 0 merges the
// warps', and the sums are combined at the row's maximum, the first pick. Keys are unique (they
// carry the id), so every round removes exactly one entry.
constexpr int kFewTopTokens = 8;

__device__ __forceinline__ void pop_front(unsigned long long (&t)[kFewTopTokens]) {
#pragma unroll
    for (int j = 0; j + 1 < kFewTopTokens; ++j) t[j] = t[j + 1];
    t[kFewTopTokens - 1] = 0ull;
}

__global__ void __launch_bounds__(kTopThreads) top_few_tokens_kernel(const float *logits, int64_t ld, int32_t n,
                                                                     int32_t k, int32_t *ids, float *logp) {
    constexpr int kWarps = kTopThreads / 32;
    __shared__ unsigned long long warp_keys[kWarps][kFewTopTokens];
    __shared__ unsigned long long picked[kFewTopTokens];
    __shared__ float fred[32];  // block_sum's scratch
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const float *row = logits + int64_t(blockIdx.x) * ld;
    unsigned long long t[kFewTopTokens];
#pragma unroll
    for (int j = 0; j < kFewTopTokens; ++j) t[j] = 0ull;  // 0: no entry (below every key)
    float m = -INFINITY, s = 0.f;
    for (int32_t i = threadIdx.x; i < n; i += kTopThreads) {
        const float x = row[i];
        const unsigned long long key = argmax_key(x, uint32_t(i));
        if (key > t[kFewTopTokens - 1]) {
            t[kFewTopTokens - 1] = key;
#pragma unroll
            for (int j = kFewTopTokens - 1; j > 0; --j)
                if (t[j] > t[j - 1]) {
                    const unsigned long long u = t[j];
                    t[j] = t[j - 1], t[j - 1] = u;
                }
        }
        if (x > m) {
            s = s * expf(m - x) + 1.f;
            m = x;
        } else if (x != -INFINITY) {
            s += expf(x - m);
        }
    }
    for (int32_t r = 0; r < k; ++r) {
        const unsigned long long w = warp_max_u64(t[0]);
        if (t[0] == w) pop_front(t);
        if (lane == 0) warp_keys[warp][r] = w;
    }
    __syncthreads();  // warp_keys complete
    if (warp == 0) {
#pragma unroll
        for (int j = 0; j < kFewTopTokens; ++j) t[j] = lane < kWarps && j < k ? warp_keys[lane][j] : 0ull;
        for (int32_t r = 0; r < k; ++r) {
            const unsigned long long w = warp_max_u64(t[0]);
            if (t[0] == w) pop_front(t);
            if (lane == 0) picked[r] = w;
        }
    }
    __syncthreads();  // picked[] complete
    // log-sum-exp over the candidates, the maximum (the first pick) taken out.
    const float mx = n > 0 ? row[~uint32_t(picked[0] & 0xffffffffull)] : -INFINITY;
    float part = 0.f;
    if (isfinite(mx) && s > 0.f) part = s * expf(m - mx);
    const float total = block_sum(part, fred);
    const float lse = mx + logf(isfinite(mx) ? total : 0.f);
    write_picks(row, picked, n, k, lse, ids, logp);
}

}  // namespace

cudaError_t launch_top_tokens(const float *logits, int64_t ld, int32_t rows, int32_t n_candidates, int32_t k,
                              int32_t *ids, float *logp, cudaStream_t stream) {
    if (rows <= 0) return cudaSuccess;
    if (k < 1 || k > kMaxTopTokens || n_candidates < 0 || ld < n_candidates) return cudaErrorInvalidValue;
    if (k <= kFewTopTokens)
        top_few_tokens_kernel<<<rows, kTopThreads, 0, stream>>>(logits, ld, n_candidates, k, ids, logp);
    else
        top_tokens_kernel<<<rows, kTopThreads, 0, stream>>>(logits, ld, n_candidates, k, ids, logp);
    return cudaGetLastError();
}

}  // namespace kern
}  // namespace specla
