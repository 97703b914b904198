#include "device_common.cuh"
#include "norms.cuh"

namespace specla {
namespace kern {

namespace {

__global__ void rmsnorm_rows_kernel(const float *x, int64_t ldx, const float *w, int64_t D, float eps,
                                    uint16_t *out) {
    __shared__ float red[32];
    pdl_wait();
    pdl_trigger();
    const int64_t t = blockIdx.x;
    const float *xr = x + t * ldx;
    float ss = 0.f;
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) ss += xr[c] * xr[c];
    ss = block_sum(ss, red);
    const float inv = rms_scale(ss, D, eps);
    for (int64_t c = threadIdx.x; c < D; c += blockDim.x) out[t * D + c] = float_to_bf16(xr[c] * inv * w[c]);
}

// One CTA per (token, value head).
__global__ void gated_norm_rows_kernel(const float *o, int64_t o_tstride, int64_t o_hstride, const float *z,
                                       int64_t z_tstride, const float *o_norm, int32_t HV, int32_t V, float eps,
                                       uint16_t *out) {
    __shared__ float red[32];
    pdl_wait();
    pdl_trigger();
    const int64_t t = blockIdx.x;
    const int hv = blockIdx.y;
    const float *op = o + t * o_tstride + int64_t(hv) * o_hstride;
    float ss = 0.f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) ss += op[j] * op[j];
    ss = block_sum(ss, red);
    const float inv = rms_scale(ss, V, eps);
    for (int j = threadIdx.x; j < V; j += blockDim.x) {
        const float gate = z ? siluf_(z[t * z_tstride + int64_t(hv) * V + j]) : 1.f;
        out[t * int64_t(HV) * V + int64_t(hv) * V + j] = float_to_bf16(op[j] * inv * o_norm[j] * gate);
    }
}

}  // namespace

cudaError_t launch_rmsnorm_rows(const float *x, int64_t ldx, const float *w, int32_t n, int64_t D, float eps,
                                uint16_t *out, const LaunchCtx &ctx) {
    if (n <= 0) return cudaSuccess;
    return launch_kernel(rmsnorm_rows_kernel, dim3(n), dim3(256), 0, ctx, x, ldx, w, D, eps, out);
}

cudaError_t launch_gated_norm_rows(const float *o, int64_t o_tstride, int64_t o_hstride, const float *z,
                                   int64_t z_tstride, const float *o_norm, int32_t n, int32_t HV, int32_t V,
                                   float eps, uint16_t *out, const LaunchCtx &ctx) {
    if (n <= 0) return cudaSuccess;
    const int threads = V >= 128 ? 128 : 32;
    return launch_kernel(gated_norm_rows_kernel, dim3(n, HV), dim3(threads), 0, ctx, o, o_tstride, o_hstride, z,
                         z_tstride, o_norm, HV, V, eps, out);
}

}  // namespace kern
}  // namespace specla
