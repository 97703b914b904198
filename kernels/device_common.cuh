// Device helpers shared by the kernels (included by .cu files only).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include <utility>

#include "launch_common.cuh"

namespace specla {
namespace kern {

// ---- programmatic dependent launch (sm_90) ------------------------------------------------------
// A kernel launched with the PDL attribute may start while its predecessor still runs. Before
// pdl_wait() it may only read data that no kernel of the current pass writes (weights, and the
// recurrent state that only this layer's kernel of the previous pass wrote); after it, everything
// earlier in the stream is complete and visible. Without the attribute both are no-ops.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// Lets the next kernel in the stream be scheduled. Called right after pdl_wait(): the dependent
// grid can then occupy free SM slots and prefetch its weights while this one finishes, but never
// runs more than one kernel ahead.
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// ---- diagnostics -----------------------------------------------------------------------------------
// Kernel-level trace slots (launch_common.cuh), built only with SPECLA_KERNEL_TRACE (the CMake option
// of that name): without it SPECLA_OP_TRACE expands to nothing, the kernels' parameter blocks have no
// trace pointer and no stamping code is compiled.
#ifdef SPECLA_KERNEL_TRACE
// Stamps phase `phase` of a kernel-level trace slot; thread 0 of each CTA.
__device__ __forceinline__ void op_trace(unsigned long long *slot, int phase) {
    if (!slot || threadIdx.x != 0) return;
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    atomicMin(slot + 2 * phase, t);
    atomicMax(slot + 2 * phase + 1, t);
}
#define SPECLA_OP_TRACE(slot, phase) ::specla::kern::op_trace((slot), (phase))
#else
#define SPECLA_OP_TRACE(slot, phase) ((void)0)
#endif

// ---- loads ------------------------------------------------------------------------------------------
// L2 policies of a decoding step: the ~3 GB of weights stream through the L2 (60 MB on the
// H200) once per step (evict-first); what every step reads again stays (evict-last): the small
// operands, and the recurrent state where a sequence's state fits in L2 (gdn_recurrent.cu).
// Measured on the H200 (same-run comparisons in bench/journal/2026-11-30-small-operands-evict-last.md
// and bench/journal/2026-11-30-recurrent-state-in-l2.md), GDN-1.3B step:
// small operands evict-last 1.0690 -> 1.0495 ms (as fast as with no norm weights at all: they no
// longer come from HBM behind the previous kernel's weight stream at the start of every GEMV); the
// state evict-last and the weights evict-first 1.0444 -> 1.0302 ms (the weights evict-first
// alone: 0.2 % slower).
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
    uint64_t p;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t l2_evict_normal_policy() {
    uint64_t p;
    asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
    return p;
}
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
    uint64_t p;
    asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
    return p;
}

// Weights: no L1 allocation, and neither the read-only (.nc) path nor a prefetch size hint (with
// .nc the step took 2.4 % longer, with L2::256B another 1 %).
__device__ __forceinline__ uint4 ld_stream(const uint4 *p) {
    uint4 r;
    asm("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
        : "l"(p), "l"(l2_evict_first_policy()));
    return r;
}

// What every step reads (and writes) again.
__device__ __forceinline__ float ld_keep(const float *p) {
    float v;
    asm("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(l2_evict_last_policy()));
    return v;
}
__device__ __forceinline__ float4 ld_keep4(const float4 *p) {
    float4 v;
    asm("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
        : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
        : "l"(p), "l"(l2_evict_last_policy()));
    return v;
}
// Starts bringing p's cache line into L1 for a load that comes later (no register held meanwhile).
__device__ __forceinline__ void prefetch_l1(const void *p) { asm volatile("prefetch.global.L1 [%0];" ::"l"(p)); }
// With a policy chosen at run time (the recurrent state: evict-last where it fits in L2).
__device__ __forceinline__ float ld_policy(const float *p, uint64_t policy) {
    float v;
    asm volatile("ld.global.L2::cache_hint.f32 %0, [%1], %2;" : "=f"(v) : "l"(p), "l"(policy));
    return v;
}
__device__ __forceinline__ void st_policy(float *p, float v, uint64_t policy) {
    asm volatile("st.global.L2::cache_hint.f32 [%0], %1, %2;" ::"l"(p), "f"(v), "l"(policy) : "memory");
}

__device__ __forceinline__ float bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float bf16_to_float(uint16_t v) { return __uint_as_float(uint32_t(v) << 16); }
// Round to nearest even (finite inputs).
__device__ __forceinline__ uint16_t float_to_bf16(float f) {
    const uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u) return uint16_t((u >> 16) | ((u & 0xffff) ? 0x40 : 0));
    return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// ---- activations (same formulas as backend/cpu/cpu_ops.h) ----------------------------------------
__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }
__device__ __forceinline__ float siluf_(float x) { return x * sigmoidf_(x); }
__device__ __forceinline__ float softplusf_(float x) { return x > 20.f ? x : log1pf(expf(x)); }
// Gated DeltaNet gates of a value head (cpu::gdn_decay_log, cpu::gdn_beta): the log decay from the
// head's `a` projection, and beta from its `b` projection (scale 2 with allow_neg_eigval). One
// definition for every kernel, so that decoding, verification and blocks agree bit for bit.
__device__ __forceinline__ float gdn_decay_logf_(float a, float A_log, float dt_bias) {
    return -expf(A_log) * softplusf_(a + dt_bias);
}
__device__ __forceinline__ float gdn_betaf_(float b, float scale) { return sigmoidf_(b) * scale; }

// ---- reductions ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
// Sum within aligned groups of `width` lanes (width a power of two <= 32).
template <int WIDTH>
__device__ __forceinline__ float group_sum(float v) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o, WIDTH);
    return v;
}
// Two independent group sums with their shuffles interleaved: each value meets exactly
// group_sum's additions in the same order (the same bits), in about the latency of one.
template <int WIDTH>
__device__ __forceinline__ void group_sum2(float &a, float &b) {
#pragma unroll
    for (int o = WIDTH / 2; o > 0; o >>= 1) {
        const float pa = __shfl_xor_sync(0xffffffffu, a, o, WIDTH);
        const float pb = __shfl_xor_sync(0xffffffffu, b, o, WIDTH);
        a += pa;
        b += pb;
    }
}
// The RMS norm's factor 1 / sqrt(mean square + eps) of n values whose squares sum to sum_sq: one
// formula for every norm kernel (standalone norms, the GEMV prologues, the persistent step).
__device__ __forceinline__ float rms_scale(float sum_sq, int64_t n, float eps) {
    return 1.f / sqrtf(sum_sq / float(n) + eps);
}
// Block-wide sum, result in every thread. `red` holds >= 32 floats; blockDim a multiple of 32.
__device__ __forceinline__ float block_sum(float v, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();  // `red` may still be read by a previous call
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float t = lane < nw ? red[lane] : 0.f;
    return warp_sum(t);
}

// ---- argmax keys ----------------------------------------------------------------------------------------
// (value, id) packed so that the unsigned maximum is the largest value with the lowest id on ties
// (the host sampler's rule). -0 is folded into +0 so that the two compare equal, as on the host.
__device__ __forceinline__ unsigned long long argmax_key(float v, uint32_t id) {
    const uint32_t u = __float_as_uint(v + 0.f);
    const uint32_t ord = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (static_cast<unsigned long long>(ord) << 32) | static_cast<unsigned long long>(~id);
}
__device__ __forceinline__ unsigned long long u64_max(unsigned long long a, unsigned long long b) {
    return a > b ? a : b;
}
__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = u64_max(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// ---- launching ------------------------------------------------------------------------------------------
// Every kernel goes through here so that programmatic dependent launch is one flag.
template <typename... KArgs, typename... Args>
inline cudaError_t launch_kernel(void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t smem,
                                 const LaunchCtx &ctx, Args &&...args) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = ctx.stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = ctx.pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

inline int32_t ceil_div(int64_t a, int64_t b) { return int32_t((a + b - 1) / b); }

}  // namespace kern
}  // namespace specla
