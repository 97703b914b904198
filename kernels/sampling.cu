#include <cub/cub.cuh>

#include "device_common.cuh"
#include "sampling.cuh"

namespace specla {
namespace kern {

namespace {

__global__ void argmax_reduce_kernel(const float *logits, int32_t n, unsigned long long *slot) {
    using BlockReduce = cub::BlockReduce<unsigned long long, 256>;
    __shared__ typename BlockReduce::TempStorage tmp;
    unsigned long long best = 0;
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        best = u64_max(best, argmax_key(logits[i], uint32_t(i)));
    best = BlockReduce(tmp).Reduce(best, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; });
    if (threadIdx.x == 0) atomicMax(slot, best);
}

__global__ void argmax_finish_kernel(const unsigned long long *slot, int32_t *out) {
    *out = int32_t(~uint32_t(*slot & 0xffffffffull));
}

__global__ void sample_prep_kernel(const float *logits, int32_t vocab, float *keys, int32_t *ids) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x) {
        keys[i] = logits[i] + 0.f;  // -0 -> +0: equal keys, so the stable sort keeps id order
        ids[i] = i;
    }
}

__global__ void sample_weights_kernel(const float *sorted, int32_t keep, int32_t vocab, float inv_t, double *w) {
    const float maxv = sorted[0];
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < vocab; i += gridDim.x * blockDim.x)
        w[i] = i < keep ? exp(double(sorted[i] - maxv) * inv_t) : 0.0;
}

// One CTA: the top-p cut, then the kept probabilities scattered to id order (pd zeroed before).
__global__ void sample_cut_kernel(const double *w, const double *cum, const int32_t *ids, int32_t keep, float top_p,
                                  double *pd, int32_t *scalars) {
    __shared__ int32_t cut_s;
    __shared__ double total_s;
    if (threadIdx.x == 0) {
        int32_t cut = keep;
        double total = cum[keep - 1];
        if (top_p < 1.f) {
            const double target = double(top_p > 0.f ? top_p : 0.f) * total;
            // First i with cum[i] >= target (cum is non-decreasing).
            int32_t lo = 0, hi = keep - 1;
            if (cum[hi] >= target) {
                while (lo < hi) {
                    const int32_t mid = (lo + hi) / 2;
                    if (cum[mid] >= target) hi = mid;
                    else lo = mid + 1;
                }
                cut = lo + 1;
            }
            total = cum[cut - 1];
        }
        cut_s = cut;
        total_s = total;
        scalars[0] = cut;
        scalars[1] = -1;
    }
    __syncthreads();
    const int32_t cut = cut_s;
    const double total = total_s;
    int32_t last = -1;
    for (int32_t i = threadIdx.x; i < cut; i += blockDim.x) {
        const float prob = float(w[i] / total);
        pd[ids[i]] = double(prob);
        if (prob > 0.f && ids[i] > last) last = ids[i];
    }
    if (last >= 0) atomicMax(&scalars[1], last);
}

// First id whose inclusive cumulative mass exceeds u * total; the last id of positive mass when
// rounding leaves none (u close to 1), as the host does (after launch_remove_tokens too, so the
// cut's last kept id is not enough: found by a backward scan, in that rare case only).
__global__ void sample_pick_kernel(const double *cum, const double *pd, int32_t vocab, double u, int32_t *out) {
    const double target = u * cum[vocab - 1];
    int32_t lo = 0, hi = vocab - 1;
    if (!(cum[hi] > target)) {
        int32_t last = vocab - 1;
        while (last > 0 && !(pd[last] > 0.0)) --last;
        *out = last;
        return;
    }
    while (lo < hi) {
        const int32_t mid = (lo + hi) / 2;
        if (cum[mid] > target) hi = mid;
        else lo = mid + 1;
    }
    // The parallel scan rounds its prefixes in another order than a running sum, so the first
    // prefix past the target may end at an id of zero mass (outside the cut, or a rejected token):
    // the mass crosses the target at the next id that has some (the last one if none follows).
    if (!(pd[lo] > 0.0)) {
        int32_t next = lo;
        while (next < vocab && !(pd[next] > 0.0)) ++next;
        if (next == vocab)
            for (next = lo; next > 0 && !(pd[next] > 0.0);) --next;
        lo = next;
    }
    *out = lo;
}

int grid_for(int32_t n) { return int((n + 255) / 256 < 256 ? (n + 255) / 256 : 256); }

constexpr int kGatherThreads = 1024;

// One CTA: out[0] = the sum of pd (the distribution's total, in a fixed order), out[1 + i] =
// pd[ids.id[i]] for the children of the walk's position.
__global__ void __launch_bounds__(kGatherThreads) gather_probs_kernel(const double *pd, int32_t vocab, TokenList ids,
                                                                      double *out) {
    using BlockReduce = cub::BlockReduce<double, kGatherThreads>;
    __shared__ typename BlockReduce::TempStorage tmp;
    double s = 0.0;
    for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) s += pd[i];
    s = BlockReduce(tmp).Sum(s);
    if (threadIdx.x == 0) out[0] = s;
    for (int32_t i = threadIdx.x; i < ids.n; i += blockDim.x) out[1 + i] = pd[ids.id[i]];
}

__global__ void remove_tokens_kernel(double *pd, TokenList ids) {
    for (int32_t i = threadIdx.x; i < ids.n; i += blockDim.x) pd[ids.id[i]] = 0.0;
}

}  // namespace

size_t sampling_temp_bytes(int32_t vocab) {
    size_t sort_bytes = 0, scan_bytes = 0;
    cub::DeviceRadixSort::SortPairsDescending(nullptr, sort_bytes, static_cast<const float *>(nullptr),
                                              static_cast<float *>(nullptr), static_cast<const int32_t *>(nullptr),
                                              static_cast<int32_t *>(nullptr), vocab);
    cub::DeviceScan::InclusiveSum(nullptr, scan_bytes, static_cast<const double *>(nullptr),
                                  static_cast<double *>(nullptr), vocab);
    return sort_bytes > scan_bytes ? sort_bytes : scan_bytes;
}

cudaError_t launch_sampling_distribution(const float *logits, int32_t vocab, float temperature, int32_t top_k,
                                         float top_p, const SamplingBuffers &b, cudaStream_t stream) {
    cudaError_t e;
    const int grid = grid_for(vocab);
    sample_prep_kernel<<<grid, 256, 0, stream>>>(logits, vocab, b.keys_in, b.ids_in);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    size_t bytes = b.temp_bytes;
    e = cub::DeviceRadixSort::SortPairsDescending(b.temp, bytes, b.keys_in, b.keys_out, b.ids_in, b.ids_out, vocab, 0,
                                                  32, stream);
    if (e != cudaSuccess) return e;
    const int32_t keep = (top_k > 0 && top_k < vocab) ? top_k : vocab;
    const float inv_t = 1.f / temperature;
    sample_weights_kernel<<<grid, 256, 0, stream>>>(b.keys_out, keep, vocab, inv_t, b.w);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    bytes = b.temp_bytes;
    e = cub::DeviceScan::InclusiveSum(b.temp, bytes, b.w, b.cum, keep, stream);
    if (e != cudaSuccess) return e;
    if ((e = cudaMemsetAsync(b.pd, 0, size_t(vocab) * sizeof(double), stream)) != cudaSuccess) return e;
    sample_cut_kernel<<<1, 1024, 0, stream>>>(b.w, b.cum, b.ids_out, keep, top_p, b.pd, b.scalars);
    return cudaGetLastError();
}

cudaError_t launch_sample_from_distribution(int32_t vocab, double u, const SamplingBuffers &b, int32_t *out_token,
                                            cudaStream_t stream) {
    size_t bytes = b.temp_bytes;
    const cudaError_t e = cub::DeviceScan::InclusiveSum(b.temp, bytes, b.pd, b.cum, vocab, stream);
    if (e != cudaSuccess) return e;
    sample_pick_kernel<<<1, 1, 0, stream>>>(b.cum, b.pd, vocab, u, out_token);
    return cudaGetLastError();
}

cudaError_t launch_sample(const float *logits, int32_t vocab, float temperature, int32_t top_k, float top_p,
                          double u, const SamplingBuffers &b, int32_t *out_token, cudaStream_t stream) {
    const cudaError_t e = launch_sampling_distribution(logits, vocab, temperature, top_k, top_p, b, stream);
    if (e != cudaSuccess) return e;
    return launch_sample_from_distribution(vocab, u, b, out_token, stream);
}

cudaError_t launch_gather_probs(const SamplingBuffers &b, int32_t vocab, const TokenList &ids, double *out,
                                cudaStream_t stream) {
    if (ids.n < 0 || ids.n > kTokenListMax) return cudaErrorInvalidValue;
    gather_probs_kernel<<<1, kGatherThreads, 0, stream>>>(b.pd, vocab, ids, out);
    return cudaGetLastError();
}

cudaError_t launch_remove_tokens(const SamplingBuffers &b, const TokenList &ids, cudaStream_t stream) {
    if (ids.n < 0 || ids.n > kTokenListMax) return cudaErrorInvalidValue;
    if (ids.n == 0) return cudaSuccess;
    remove_tokens_kernel<<<1, 64, 0, stream>>>(b.pd, ids);
    return cudaGetLastError();
}

cudaError_t launch_argmax(const float *logits, int32_t n, unsigned long long *slot, int32_t *out_token,
                          cudaStream_t stream) {
    cudaError_t e = cudaMemsetAsync(slot, 0, sizeof(unsigned long long), stream);
    if (e != cudaSuccess) return e;
    argmax_reduce_kernel<<<grid_for(n), 256, 0, stream>>>(logits, n, slot);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    argmax_finish_kernel<<<1, 1, 0, stream>>>(slot, out_token);
    return cudaGetLastError();
}

}  // namespace kern
}  // namespace specla
