#include "conv.cuh"
#include "device_common.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kThreads = 256;

// One CTA per token (padded rows included). Shared memory: the 2*H*K post-SiLU q|k values of the
// token and the 2*H squared norms.
__global__ void __launch_bounds__(kThreads) conv_prefill_kernel(const ConvPrefillParams p) {
    extern __shared__ float sm[];
    const int K = p.K, V = p.V, H = p.H, HV = p.HV, W = p.W;
    const int64_t KD = int64_t(H) * K, VD = int64_t(HV) * V, CC = 2 * KD + VD, Tp = p.n_padded;
    float *qk = sm;
    float *ss = sm + 2 * KD;
    const int t = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, nw = blockDim.x >> 5;
    pdl_wait();
    pdl_trigger();
    if (t >= p.n) {
        for (int64_t c = tid; c < KD; c += blockDim.x) {
            const int64_t hh = c / K, i = c % K;
            p.q[(hh * Tp + t) * K + i] = 0.f;
            p.k[(hh * Tp + t) * K + i] = 0.f;
        }
        for (int64_t c = tid; c < VD; c += blockDim.x) p.v[(c / V * Tp + t) * V + c % V] = 0.f;
        for (int hv = tid; hv < HV; hv += blockDim.x) p.g[hv * Tp + t] = 0.f, p.beta[hv * Tp + t] = 0.f;
        return;
    }
    for (int64_t c = tid; c < CC; c += blockDim.x) {
        float acc;
        if (p.use_short_conv) {
            acc = 0.f;
            const float *w = p.conv_w + c * W;
            for (int j = 0; j < W; ++j) {
                const int src = t - (W - 1) + j;
                const float in = src >= 0 ? p.proj[int64_t(src) * p.proj_ld + c] : p.conv_cache[int64_t(W - 1 + src) * CC + c];
                acc += w[j] * in;
            }
        } else {
            acc = p.proj[int64_t(t) * p.proj_ld + c];
        }
        const float y = siluf_(acc);
        if (c < 2 * KD) qk[c] = y;
        else {
            const int64_t vv = c - 2 * KD;
            p.v[(vv / V * Tp + t) * V + vv % V] = y;
        }
    }
    __syncthreads();
    // Squared norms of the 2H heads (q heads, then k heads), one warp per head: deterministic.
    for (int hh = warp; hh < 2 * H; hh += nw) {
        float s = 0.f;
        for (int i = lane; i < K; i += 32) s += qk[hh * K + i] * qk[hh * K + i];
        s = warp_sum(s);
        if (lane == 0) ss[hh] = s;
    }
    __syncthreads();
    for (int64_t c = tid; c < 2 * KD; c += blockDim.x) {
        const int hh = int(c / K), i = int(c % K);
        if (hh < H) p.q[(int64_t(hh) * Tp + t) * K + i] = qk[c] * (p.q_scale / sqrtf(ss[hh] + 1e-6f));
        else p.k[(int64_t(hh - H) * Tp + t) * K + i] = qk[c] * (1.f / sqrtf(ss[hh] + 1e-6f));
    }
    for (int hv = tid; hv < HV; hv += blockDim.x) {
        const float a = p.proj[int64_t(t) * p.proj_ld + p.row_a + hv];
        const float b = p.proj[int64_t(t) * p.proj_ld + p.row_b + hv];
        p.g[hv * Tp + t] = gdn_decay_logf_(a, p.A_log[hv], p.dt_bias[hv]);
        p.beta[hv * Tp + t] = gdn_betaf_(b, p.beta_scale);
    }
}

__global__ void conv_cache_update_kernel(float *cache, const float *proj, int64_t proj_ld, int32_t n, int32_t W,
                                         int64_t CC) {
    pdl_wait();
    pdl_trigger();
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < CC; c += int64_t(gridDim.x) * blockDim.x) {
        // Increasing j reads old entries j+n > j that are not yet overwritten.
        for (int j = 0; j < W - 1; ++j) {
            const int src = n - (W - 1) + j;
            cache[j * CC + c] = src >= 0 ? proj[int64_t(src) * proj_ld + c] : cache[int64_t(j + n) * CC + c];
        }
    }
}

}  // namespace

cudaError_t launch_conv_prefill(const ConvPrefillParams &p, const LaunchCtx &ctx) {
    const size_t smem = (size_t(2) * p.H * p.K + size_t(2) * p.H) * 4;
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(conv_prefill_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        if (e != cudaSuccess) return e;
    }
    return launch_kernel(conv_prefill_kernel, dim3(p.n_padded), dim3(kThreads), smem, ctx, p);
}

cudaError_t launch_conv_cache_update(float *conv_cache, const float *proj, int64_t proj_ld, int32_t n, int32_t W,
                                     int64_t CC, const LaunchCtx &ctx) {
    if (W <= 1) return cudaSuccess;
    const int grid = ceil_div(CC, 256) < 64 ? ceil_div(CC, 256) : 64;
    return launch_kernel(conv_cache_update_kernel, dim3(grid), dim3(256), 0, ctx, conv_cache, proj, proj_ld, n, W, CC);
}

}  // namespace kern
}  // namespace specla
