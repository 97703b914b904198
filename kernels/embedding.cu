#include "device_common.cuh"
#include "embedding.cuh"

namespace specla {
namespace kern {

namespace {

__global__ void embedding_kernel(const uint16_t *emb, const int32_t *tokens, int64_t D, float *h, int64_t h_ld,
                                 unsigned long long *argmax_reset) {
    pdl_wait();
    pdl_trigger();
    const int t = blockIdx.y;
    const int64_t row = tokens[t];
    const uint16_t *src = emb + row * D;
    float *dst = h + int64_t(t) * h_ld;
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < D; c += int64_t(gridDim.x) * blockDim.x)
        dst[c] = bf16_to_float(src[c]);
    if (argmax_reset && t == 0 && blockIdx.x == 0 && threadIdx.x == 0) *argmax_reset = 0ull;
}

}  // namespace

cudaError_t launch_embedding(const uint16_t *emb, const int32_t *tokens, int32_t n, int64_t D, float *h, int64_t h_ld,
                             unsigned long long *argmax_reset, const LaunchCtx &ctx) {
    if (h_ld < D) return cudaErrorInvalidValue;
    const int threads = 256;
    const int gx = ceil_div(D, threads) < 8 ? ceil_div(D, threads) : 8;
    return launch_kernel(embedding_kernel, dim3(gx, n), dim3(threads), 0, ctx, emb, tokens, D, h, h_ld, argmax_reset);
}

}  // namespace kern
}  // namespace specla
