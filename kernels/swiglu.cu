#include "device_common.cuh"
#include "swiglu.cuh"

namespace specla {
namespace kern {

namespace {

__global__ void swiglu_rows_kernel(const float *gu, int64_t I, uint16_t *out) {
    pdl_wait();
    pdl_trigger();
    const int64_t t = blockIdx.y;
    for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < I; j += int64_t(gridDim.x) * blockDim.x)
        out[t * I + j] = float_to_bf16(siluf_(gu[t * 2 * I + j]) * gu[t * 2 * I + I + j]);
}

}  // namespace

cudaError_t launch_swiglu_rows(const float *gu, int32_t n, int64_t I, uint16_t *out, const LaunchCtx &ctx) {
    if (n <= 0) return cudaSuccess;
    const int threads = 256;
    const int gx = ceil_div(I, threads) < 16 ? ceil_div(I, threads) : 16;
    return launch_kernel(swiglu_rows_kernel, dim3(gx, n), dim3(threads), 0, ctx, gu, I, out);
}

}  // namespace kern
}  // namespace specla
