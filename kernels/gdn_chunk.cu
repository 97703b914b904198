// Chunk-form kernels of the Gated DeltaNet recurrence (see gdn_chunk.cuh).
#include <mma.h>

#include "device_common.cuh"
#include "gdn_chunk.cuh"

namespace specla {
namespace kern {

namespace {

using namespace nvcuda;
constexpr int C = kChunk;
constexpr int VS = 16;  // value columns per CTA in the state pass

// ---- prep: gates, the WY inverse, masks ------------------------------------------------------------
// One CTA of 256 threads per (chunk, value head).
__global__ void __launch_bounds__(256) chunk_prep_kernel(const ChunkPrepParams p) {
    __shared__ float A[C][C + 1];
    __shared__ float Tm[C][C + 1];
    __shared__ float part[4][C];
    __shared__ float gam[C], bet[C];
    const int c = blockIdx.x, hv = blockIdx.y, tid = threadIdx.x;
    const int h = hv / (p.HV / p.H);
    const int64_t Tp = int64_t(p.n_chunks) * C, t0 = int64_t(c) * C;
    pdl_wait();
    pdl_trigger();
    if (tid < C) {
        gam[tid] = p.g[hv * Tp + t0 + tid];
        bet[tid] = p.beta[hv * Tp + t0 + tid];
    }
    __syncthreads();
    if (tid == 0) {
        float acc = 0.f;
        for (int i = 0; i < C; ++i) acc += gam[i], gam[i] = acc;
    }
    __syncthreads();
    if (tid < C) p.gam[hv * Tp + t0 + tid] = gam[tid];
    const float *G = p.G + (int64_t(h) * p.n_chunks + c) * C * C;
    const float *QK = p.QK + (int64_t(h) * p.n_chunks + c) * C * C;
    float *Pm = p.Pm + (int64_t(hv) * p.n_chunks + c) * C * C;
    for (int idx = tid; idx < C * C; idx += blockDim.x) {
        const int i = idx / C, j = idx % C;
        // exp only where i >= j: gam is non-increasing, so those factors are <= 1.
        const float decay = i >= j ? expf(gam[i] - gam[j]) : 0.f;
        A[i][j] = i > j ? bet[i] * G[idx] * decay : 0.f;
        Pm[idx] = i >= j ? QK[idx] * decay : 0.f;
        Tm[i][j] = 0.f;
    }
    __syncthreads();
    // T = (I + A)^-1, row by row: T[i] = e_i - sum_{j<i} A[i][j] T[j]. 4 partial sums per column.
    const int col = tid % C, pr = tid / C;
    for (int i = 0; i < C; ++i) {
        float s = 0.f;
        for (int j = pr; j < i; j += 4) s += A[i][j] * Tm[j][col];
        part[pr][col] = s;
        __syncthreads();
        if (pr == 0) Tm[i][col] = (i == col ? 1.f : 0.f) - (part[0][col] + part[1][col] + part[2][col] + part[3][col]);
        __syncthreads();
    }
    float *Tb = p.Tb + (int64_t(hv) * p.n_chunks + c) * C * C;
    float *Tu = p.Tu + (int64_t(hv) * p.n_chunks + c) * C * C;
    for (int idx = tid; idx < C * C; idx += blockDim.x) {
        const int i = idx / C, j = idx % C;
        const float t = Tm[i][j];
        Tu[idx] = t * bet[j];
        Tb[idx] = t * bet[j] * expf(gam[j]);
    }
}

// ---- the state pass (WMMA m16n16k8 TF32, fp32 accumulate) --------------------------------------------
using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragAt = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

template <typename F>
__device__ __forceinline__ void to_tf32(F &f, float scale = 1.f) {
#pragma unroll
    for (int i = 0; i < f.num_elements; ++i) f.x[i] = wmma::__float_to_tf32(f.x[i] * scale);
}

// acc += sum over k-steps u < ksteps of A_u B_u, with A_u at A + u * a_step (ld lda, layout of FA) and
// B_u at B + u * b_step (row-major, ld ldb). Loads are issued 8 k-steps at a time before their
// products, so several global/L2 fragment loads are in flight per warp.
template <typename FA>
__device__ __forceinline__ void mma_ksteps(FragC &acc, const float *A, int64_t a_step, int lda, const float *B,
                                           int b_step, int ldb, int ksteps, float a_scale) {
    constexpr int G = 8;
    for (int k0 = 0; k0 < ksteps; k0 += G) {
        FA a[G];
        FragB b[G];
#pragma unroll
        for (int u = 0; u < G; ++u)
            if (k0 + u < ksteps) {
                wmma::load_matrix_sync(a[u], A + int64_t(k0 + u) * a_step, lda);
                wmma::load_matrix_sync(b[u], B + (k0 + u) * b_step, ldb);
            }
#pragma unroll
        for (int u = 0; u < G; ++u)
            if (k0 + u < ksteps) {
                to_tf32(a[u], a_scale);
                to_tf32(b[u]);
                wmma::mma_sync(acc, a[u], b[u], acc);
            }
    }
}

// 4 warps; warp w owns chunk rows [16w, 16w+16) in the C x VS products and state row tiles
// w, w+4, ... in the K x VS update. Shared memory (floats): S [K][VS] | Vt [C][VS] | Vts [C][VS] |
// Ot [4][16*16] | eg [C] | ekc [C].
__global__ void __launch_bounds__(128) chunk_state_kernel(const ChunkPassParams p) {
    extern __shared__ __align__(128) float sm[];
    const int K = p.K, V = p.V;
    float *S = sm;
    float *Vt = S + K * VS;
    float *Vts = Vt + C * VS;
    float *Ot = Vts + C * VS;
    float *eg = Ot + 4 * 256;
    float *ekc = eg + C;
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int j0 = blockIdx.x * VS, hv = blockIdx.y, h = hv / (p.HV / p.H);
    const int64_t Tp = int64_t(p.n_chunks) * C;
    float *state = p.state + (int64_t(hv) * V + j0) * K;  // VS rows of K floats
    pdl_wait();
    pdl_trigger();
    for (int idx = tid; idx < VS * K; idx += blockDim.x) {
        const int jj = idx / K, i = idx % K;
        S[i * VS + jj] = state[int64_t(jj) * K + i];
    }
    __syncthreads();

    for (int c = 0; c < p.n_chunks; ++c) {
        const int64_t t0 = int64_t(c) * C;
        const float *gam = p.gam + int64_t(hv) * Tp + t0;
        const float gC = gam[C - 1];
        if (tid < C) {
            eg[tid] = expf(gam[tid]);
            ekc[tid] = expf(gC - gam[tid]);
        }
        const float egC = expf(gC);
        const int64_t row0 = t0 + warp * 16;  // this warp's first token row

        // Vt = U - W S
        {
            FragC acc;
            wmma::load_matrix_sync(acc, p.U + (int64_t(hv) * Tp + row0) * V + j0, V, wmma::mem_row_major);
            mma_ksteps<FragA>(acc, p.W + (int64_t(hv) * Tp + row0) * K, 8, K, S, 8 * VS, VS, K / 8, -1.f);
            wmma::store_matrix_sync(Vt + warp * 16 * VS, acc, VS, wmma::mem_row_major);
        }
        __syncthreads();
        for (int idx = tid; idx < C * VS; idx += blockDim.x) Vts[idx] = Vt[idx] * ekc[idx / VS];

        // O = diag(e^gam) Q S + Pm Vt
        {
            FragC acc;
            wmma::fill_fragment(acc, 0.f);
            mma_ksteps<FragA>(acc, p.q + (int64_t(h) * Tp + row0) * K, 8, K, S, 8 * VS, VS, K / 8, 1.f);
            float *ot = Ot + warp * 256;
            wmma::store_matrix_sync(ot, acc, 16, wmma::mem_row_major);
            __syncwarp();
            for (int e = lane; e < 256; e += 32) ot[e] *= eg[warp * 16 + e / 16];
            __syncwarp();
            wmma::load_matrix_sync(acc, ot, 16, wmma::mem_row_major);
            // Pm is lower triangular: rows of this warp need columns < 16 (warp + 1) only.
            mma_ksteps<FragA>(acc, p.Pm + ((int64_t(hv) * p.n_chunks + c) * C + warp * 16) * C, 8, C, Vt, 8 * VS, VS,
                              (warp + 1) * 2, 1.f);
            wmma::store_matrix_sync(p.o + (int64_t(hv) * Tp + row0) * V + j0, acc, V, wmma::mem_row_major);
        }
        __syncthreads();  // every read of S for this chunk is done; Vts is complete

        // S = e^{gam_C} S + K^T Vts
        const float *Kc = p.k + (int64_t(h) * Tp + t0) * K;
        for (int m = warp; m < K / 16; m += 4) {
            FragC acc;
            wmma::load_matrix_sync(acc, S + m * 16 * VS, VS, wmma::mem_row_major);
#pragma unroll
            for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= egC;
            mma_ksteps<FragAt>(acc, Kc + m * 16, int64_t(8) * K, K, Vts, 8 * VS, VS, C / 8, 1.f);
            wmma::store_matrix_sync(S + m * 16 * VS, acc, VS, wmma::mem_row_major);
        }
        __syncthreads();
    }
    for (int idx = tid; idx < VS * K; idx += blockDim.x) {
        const int jj = idx / K, i = idx % K;
        state[int64_t(jj) * K + i] = S[i * VS + jj];
    }
}

}  // namespace

cudaError_t launch_chunk_prep(const ChunkPrepParams &p, const LaunchCtx &ctx) {
    if (p.n_chunks <= 0) return cudaSuccess;
    return launch_kernel(chunk_prep_kernel, dim3(p.n_chunks, p.HV), dim3(256), 0, ctx, p);
}

cudaError_t launch_chunk_state_pass(const ChunkPassParams &p, const LaunchCtx &ctx) {
    if (p.n_chunks <= 0) return cudaSuccess;
    if (!chunk_form_supported(p.K, p.V)) return cudaErrorInvalidValue;
    const size_t smem = (size_t(p.K) * VS + 2 * C * VS + 4 * 256 + 2 * C) * 4;
    if (smem > 48 * 1024) {
        cudaError_t e = cudaFuncSetAttribute(chunk_state_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem));
        if (e != cudaSuccess) return e;
    }
    return launch_kernel(chunk_state_kernel, dim3(p.V / VS, p.HV), dim3(128), smem, ctx, p);
}

}  // namespace kern
}  // namespace specla
