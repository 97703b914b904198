// Experiment: a tensor-core GEMV for 1..64 token rows whose weights are permuted once (at load) into
// the MMA's fragment order, so that each warp load is 512 contiguous bytes: one 16x16 weight tile.
//
//   out[t][r] = sum_k W[r][k] * x[t][k]     W bf16 [rows][K], x fp32 [n][x_ld], out fp32 [n][out_ld]
//
// mma.sync.m16n8k16 with the weights as A (16 rows x 16 k) and the tokens as B (16 k x 8 tokens).
// Each fp32 input is split into a bf16 pair (hi = bf16(x), lo = bf16(x - hi)) and both halves go
// through the same weight fragment, so the products are those of fp32 inputs to about 2^-16.
// Batch invariance: MMA column j depends on B column j only, and the K split (S slices, summed in
// order) is a function of the shape, never of n, so a token's outputs are bitwise the same whatever
// else shares the pass.
//
// Inside a tile the k order is permuted (the same permutation for W and x, so the math is a sum over
// the same products): MMA k (2t, 2t+1, 2t+8, 2t+9) of lane group t is physical k 4t..4t+3, so a
// lane's B fragment of one token is one float4 of x and its A fragment one uint4 of Wp.
//
// Build: configure with -DSPECLA_BUILD_EXPERIMENTS=ON (target bench_tc_gemv), or by hand:
//   nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -Ikernels \
//   bench/experiments/tc_gemv/tc_gemv.cu kernels/gemv.cu kernels/gemv_multi.cu -o bench_tc_gemv
// Run: bench_tc_gemv [--reps N]   (correctness against double and across row counts, then timing
// against the product's FMA GEMV at one row and its multi-row GEMV at 16 rows, plain and with PDL launches)
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "device_common.cuh"
#include "gemv.cuh"
#include "gemv_multi.cuh"
#include "fragment_order.cuh"
#include "harness.cuh"

namespace {

using namespace specla::kern;
using namespace specla::tcx;

struct TcParams {
    const uint4 *wp = nullptr;  // permuted weights
    int64_t rows = 0, K = 0;
    const float *x = nullptr;
    int64_t x_ld = 0;
    int32_t n = 1;
    float *out = nullptr;
    int64_t out_ld = 0;
    int32_t S = 1;  // K slices (warps per CTA); kts = KT / S k-tiles each, a multiple of D
};

// CTA: S warps on RW consecutive row tiles, warp s on k-tiles [s*kts, (s+1)*kts). NG groups of 8
// tokens (template: register arrays), groups past the live ones skipped.
template <int NG, int RW, int D>
__global__ void __launch_bounds__(512) tc_gemv_kernel(const TcParams p) {
    extern __shared__ float red[];  // [S][RW][32][4]
    const int lane = threadIdx.x & 31, s = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int64_t KT = p.K / 16, RT = (p.rows + 15) / 16;
    const int kts = int(KT / p.S);
    const int64_t rt0 = int64_t(blockIdx.x) * RW;
    const int ng_live = (p.n + 7) / 8;
    // Weight stream of tile j: Wp[(rt0 + j)][s*kts + i][lane].
    const uint4 *wp[RW];
#pragma unroll
    for (int j = 0; j < RW; ++j) {
        const int64_t rt = rt0 + j < RT ? rt0 + j : RT - 1;  // a duplicate tile past the end: not stored
        wp[j] = p.wp + ((rt * KT) + int64_t(s) * kts) * 32 + lane;
    }
    const float *xp[NG];
    bool xv[NG];
#pragma unroll
    for (int q = 0; q < NG; ++q) {
        const int tok = q * 8 + g;
        xv[q] = tok < p.n;
        xp[q] = p.x + int64_t(xv[q] ? tok : 0) * p.x_ld + int64_t(s) * kts * 16 + 4 * t;
    }
    float acc[NG][RW][4];
#pragma unroll
    for (int q = 0; q < NG; ++q)
#pragma unroll
        for (int j = 0; j < RW; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[q][j][e] = 0.f;

    uint4 w[D][RW];
#pragma unroll
    for (int i = 0; i < D; ++i)
#pragma unroll
        for (int j = 0; j < RW; ++j) w[i][j] = ld_stream(wp[j] + i * 32);
    // The weights do not depend on the previous kernel: with programmatic dependent launch the first
    // ring is in flight before the wait (no-ops without the launch attribute).
    pdl_wait();
    pdl_trigger();

    for (int i0 = 0; i0 < kts; i0 += D) {  // kts % 8 == 0 and D divides 8
#pragma unroll
        for (int d = 0; d < D; ++d) {
            const int i = i0 + d;
            uint4 cur[RW];
#pragma unroll
            for (int j = 0; j < RW; ++j) {
                cur[j] = w[d][j];
                if (i + D < kts) w[d][j] = ld_stream(wp[j] + (i + D) * 32);
            }
#pragma unroll
            for (int q = 0; q < NG; ++q) {
                if (q >= ng_live) break;
                float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                if (xv[q]) v = *reinterpret_cast<const float4 *>(xp[q] + i * 16);
                uint32_t hi[2], lo[2];
                split_x(v, hi, lo);
#pragma unroll
                for (int j = 0; j < RW; ++j) {
                    mma_bf16(acc[q][j], cur[j], hi);
                    mma_bf16(acc[q][j], cur[j], lo);
                }
            }
        }
    }

    // K slices summed in order s = 0..S-1, one token group at a time.
#pragma unroll
    for (int q = 0; q < NG; ++q) {
        if (q >= ng_live) break;
#pragma unroll
        for (int j = 0; j < RW; ++j)
            reinterpret_cast<float4 *>(red)[(s * RW + j) * 32 + lane] =
                make_float4(acc[q][j][0], acc[q][j][1], acc[q][j][2], acc[q][j][3]);
        __syncthreads();
        // Output (tile j, lane L, element e): row = 16*(rt0+j) + L/4 + 8*(e/2), token = 8q + 2*(L%4) + e%2.
        for (int o = threadIdx.x; o < RW * 128; o += blockDim.x) {
            // o enumerates (j, token-in-group c, row-in-tile rr) with rr fastest: coalesced stores.
            const int rr = o & 15, c = (o >> 4) & 7, j = o >> 7;
            const int L = (rr & 7) * 4 + (c >> 1), e = (rr >> 3) * 2 + (c & 1);
            float y = 0.f;
            for (int ss = 0; ss < p.S; ++ss) y += red[((ss * RW + j) * 32 + L) * 4 + e];
            const int64_t row = (rt0 + j) * 16 + rr;
            const int tok = q * 8 + c;
            if (rt0 + j < RT && row < p.rows && tok < p.n) p.out[int64_t(tok) * p.out_ld + row] = y;
        }
        __syncthreads();
    }
}

bool g_pdl = false;  // launch the first form with programmatic dependent launch

template <int NG, int RW, int D>
cudaError_t launch_tc_ng(const TcParams &p, cudaStream_t st) {
    const int64_t RT = (p.rows + 15) / 16;
    const dim3 grid(unsigned((RT + RW - 1) / RW)), block(unsigned(32 * p.S));
    const size_t smem = size_t(p.S) * RW * 32 * 16;
    auto fn = tc_gemv_kernel<NG, RW, D>;
    if (smem > 48 * 1024) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    LaunchCtx ctx;
    ctx.stream = st, ctx.pdl = g_pdl;
    return launch_kernel(fn, grid, block, smem, ctx, p);
}

// Second form: persistent CTAs. A CTA walks row-tile groups grp = blockIdx.x, + gridDim.x, ..., and
// each warp's weight ring runs on across groups (the last stages of a group prefetch the first ones
// of the next), so the memory system sees one stream per warp for the whole kernel instead of a
// ramp and a drain per CTA. Same arithmetic as the first form (same S).
template <int NG, int RW, int D>
__global__ void __launch_bounds__(512) tc_gemv_persistent(const TcParams p) {
    extern __shared__ float red[];  // [S][RW][32][4]
    const int lane = threadIdx.x & 31, s = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
    const int64_t KT = p.K / 16, RT = (p.rows + 15) / 16;
    const int64_t n_groups = (RT + RW - 1) / RW;
    const int kts = int(KT / p.S);
    const int ng_live = (p.n + 7) / 8;
    auto tile_ptr = [&](int64_t grp, int j) {
        int64_t rt = grp * RW + j;
        rt = rt < RT ? rt : RT - 1;  // a duplicate tile past the end: not stored
        return p.wp + ((rt * KT) + int64_t(s) * kts) * 32 + lane;
    };
    const float *xp[NG];
    bool xv[NG];
#pragma unroll
    for (int q = 0; q < NG; ++q) {
        const int tok = q * 8 + g;
        xv[q] = tok < p.n;
        xp[q] = p.x + int64_t(xv[q] ? tok : 0) * p.x_ld + int64_t(s) * kts * 16 + 4 * t;
    }
    int64_t grp = blockIdx.x;
    uint4 w[D][RW];
#pragma unroll
    for (int i = 0; i < D; ++i)
#pragma unroll
        for (int j = 0; j < RW; ++j) w[i][j] = ld_stream(tile_ptr(grp, j) + i * 32);

    while (grp < n_groups) {
        const int64_t next = grp + gridDim.x;
        const uint4 *cp[RW], *np[RW];
#pragma unroll
        for (int j = 0; j < RW; ++j) cp[j] = tile_ptr(grp, j), np[j] = tile_ptr(next < n_groups ? next : grp, j);
        float acc[NG][RW][4];
#pragma unroll
        for (int q = 0; q < NG; ++q)
#pragma unroll
            for (int j = 0; j < RW; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[q][j][e] = 0.f;
        for (int i0 = 0; i0 < kts; i0 += D) {
#pragma unroll
            for (int d = 0; d < D; ++d) {
                const int i = i0 + d;
                uint4 cur[RW];
#pragma unroll
                for (int j = 0; j < RW; ++j) {
                    cur[j] = w[d][j];
                    if (i + D < kts) w[d][j] = ld_stream(cp[j] + (i + D) * 32);
                    else if (next < n_groups) w[d][j] = ld_stream(np[j] + (i + D - kts) * 32);
                }
#pragma unroll
                for (int q = 0; q < NG; ++q) {
                    if (q >= ng_live) break;
                    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
                    if (xv[q]) v = *reinterpret_cast<const float4 *>(xp[q] + i * 16);
                    uint32_t hi[2], lo[2];
                    split_x(v, hi, lo);
#pragma unroll
                    for (int j = 0; j < RW; ++j) {
                        mma_bf16(acc[q][j], cur[j], hi);
                        mma_bf16(acc[q][j], cur[j], lo);
                    }
                }
            }
        }
        const int64_t rt0 = grp * RW;
#pragma unroll
        for (int q = 0; q < NG; ++q) {
            if (q >= ng_live) break;
#pragma unroll
            for (int j = 0; j < RW; ++j)
                reinterpret_cast<float4 *>(red)[(s * RW + j) * 32 + lane] =
                    make_float4(acc[q][j][0], acc[q][j][1], acc[q][j][2], acc[q][j][3]);
            __syncthreads();
            for (int o = threadIdx.x; o < RW * 128; o += blockDim.x) {
                const int rr = o & 15, c = (o >> 4) & 7, j = o >> 7;
                const int L = (rr & 7) * 4 + (c >> 1), e = (rr >> 3) * 2 + (c & 1);
                float y = 0.f;
                for (int ss = 0; ss < p.S; ++ss) y += red[((ss * RW + j) * 32 + L) * 4 + e];
                const int64_t row = (rt0 + j) * 16 + rr;
                const int tok = q * 8 + c;
                if (rt0 + j < RT && row < p.rows && tok < p.n) p.out[int64_t(tok) * p.out_ld + row] = y;
            }
            __syncthreads();
        }
        grp = next;
    }
}

int g_sm_count = 132;
int g_ctas_per_sm = 0;  // persistent form: 0 = as many as fit

template <int NG, int RW, int D>
cudaError_t launch_tcp_ng(const TcParams &p, cudaStream_t st) {
    const int64_t RT = (p.rows + 15) / 16, n_groups = (RT + RW - 1) / RW;
    const size_t smem = size_t(p.S) * RW * 32 * 16;
    auto fn = tc_gemv_persistent<NG, RW, D>;
    if (smem > 48 * 1024) CK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    int per_sm = g_ctas_per_sm;
    if (per_sm <= 0) CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, fn, 32 * p.S, smem));
    const int64_t grid = std::min<int64_t>(n_groups, int64_t(std::max(per_sm, 1)) * g_sm_count);
    fn<<<unsigned(grid), unsigned(32 * p.S), smem, st>>>(p);
    return cudaGetLastError();
}

cudaError_t launch_tcp(const TcParams &p, int rw, cudaStream_t st) {
    const int ng = (p.n + 7) / 8;
    if (ng <= 1) return rw == 1 ? launch_tcp_ng<1, 1, 8>(p, st) : rw == 2 ? launch_tcp_ng<1, 2, 4>(p, st) : launch_tcp_ng<1, 4, 4>(p, st);
    if (ng <= 2) return rw == 1 ? launch_tcp_ng<2, 1, 8>(p, st) : rw == 2 ? launch_tcp_ng<2, 2, 4>(p, st) : launch_tcp_ng<2, 4, 2>(p, st);
    if (ng <= 4) return rw == 1 ? launch_tcp_ng<4, 1, 8>(p, st) : launch_tcp_ng<4, 2, 4>(p, st);
    return launch_tcp_ng<8, 1, 4>(p, st);
}

// Register budget (128 per thread at 512 threads): accumulators NG x RW x 4 and the ring D x RW x 4,
// so wide token groups take fewer row tiles per warp (RW does not change the arithmetic).
cudaError_t launch_tc(const TcParams &p, int rw, cudaStream_t st) {
    const int ng = (p.n + 7) / 8;
    if (ng <= 1) return rw == 1 ? launch_tc_ng<1, 1, 8>(p, st) : rw == 2 ? launch_tc_ng<1, 2, 4>(p, st) : launch_tc_ng<1, 4, 4>(p, st);
    if (ng <= 2) return rw == 1 ? launch_tc_ng<2, 1, 8>(p, st) : rw == 2 ? launch_tc_ng<2, 2, 4>(p, st) : launch_tc_ng<2, 4, 2>(p, st);
    if (ng <= 4) return rw == 1 ? launch_tc_ng<4, 1, 8>(p, st) : launch_tc_ng<4, 2, 4>(p, st);
    return launch_tc_ng<8, 1, 4>(p, st);
}

struct Shape {
    const char *name;
    int64_t rows, K;
    int layers;
};

// K slices allowed for a shape: kts = KT/S a multiple of 8 (the ring depth), S <= 16.
std::vector<int> slice_options(int64_t K) {
    std::vector<int> v;
    const int64_t KT = K / 16;
    for (int S = 1; S <= 16; ++S)
        if (KT % S == 0 && (KT / S) % 8 == 0) v.push_back(S);
    return v;
}

}  // namespace

int main(int argc, char **argv) {
    int reps = 50;
    for (int i = 1; i < argc; ++i)
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    int sm = 0;
    CK(cudaDeviceGetAttribute(&sm, cudaDevAttrMultiProcessorCount, 0));
    g_sm_count = sm;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device %s, %d SMs\n", prop.name, sm);
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));

    const Shape shapes[] = {{"in_proj", 8208, 2048, 24}, {"o_proj", 2048, 2048, 24}, {"gate_up", 11264, 2048, 24},
                            {"down", 2048, 5632, 24},    {"lm_head", 32000, 2048, 4}, {"odd", 1000, 1024, 2}};
    const int kMaxN = 64;
    int failures = 0;
    for (const Shape &sh : shapes) {
        const int64_t wn = sh.rows * sh.K;
        const int64_t RT = (sh.rows + 15) / 16, KT = sh.K / 16;
        std::vector<uint16_t *> W(sh.layers);
        std::vector<uint4 *> Wp(sh.layers);
        for (int l = 0; l < sh.layers; ++l) {
            CK(cudaMalloc(&W[l], wn * 2));
            CK(cudaMalloc(&Wp[l], RT * KT * 32 * 16));
            fill_bf16<<<1024, 256, 0, st>>>(W[l], wn, 0x9e3779b9u * (l + 1), 0.05f);
            permute_weights<<<unsigned((RT * KT * 32 + 255) / 256), 256, 0, st>>>(W[l], sh.rows, sh.K, Wp[l]);
        }
        CK(cudaGetLastError());
        const int64_t x_ld = sh.K + 16;  // a stride that is not the width
        std::vector<float> hx(size_t(kMaxN) * x_ld, 0.f);
        std::mt19937 rng(1234);
        std::uniform_real_distribution<float> uni(-1.f, 1.f);
        for (auto &v : hx) v = uni(rng);
        float *x, *out, *out1, *outf;
        CK(cudaMalloc(&x, hx.size() * 4));
        CK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
        const int64_t out_ld = sh.rows + 3;
        CK(cudaMalloc(&out, size_t(kMaxN) * out_ld * 4));
        CK(cudaMalloc(&out1, size_t(kMaxN) * out_ld * 4));
        CK(cudaMalloc(&outf, size_t(kMaxN) * out_ld * 4));

        const std::vector<int> Ss = slice_options(sh.K);
        // ---- correctness: per slice count, every token alone, then batches of n; vs double ----------
        std::vector<uint16_t> hw(wn);
        CK(cudaMemcpy(hw.data(), W[0], wn * 2, cudaMemcpyDeviceToHost));
        std::vector<float> h0;  // the first form's outputs for all 64 tokens at S = the largest option
        for (int form : {0, 1}) {
            for (int S : Ss) {
                for (int rw : {1, 2, 4}) {
                    if (strcmp(sh.name, "odd") && rw != (form ? 4 : 1)) continue;  // RW does not change arithmetic
                    TcParams p;
                    p.wp = Wp[0], p.rows = sh.rows, p.K = sh.K, p.x_ld = x_ld, p.out_ld = out_ld, p.S = S;
                    auto launch = [&](const TcParams &q) { return form ? launch_tcp(q, rw, st) : launch_tc(q, rw, st); };
                    for (int tok = 0; tok < kMaxN; ++tok) {
                        p.x = x + tok * x_ld, p.n = 1, p.out = out1 + tok * out_ld;
                        CK(launch(p));
                    }
                    std::vector<float> h1(size_t(kMaxN) * out_ld), hn(size_t(kMaxN) * out_ld);
                    CK(cudaMemcpy(h1.data(), out1, h1.size() * 4, cudaMemcpyDeviceToHost));
                    int bad_bits = 0;
                    for (int n : {2, 3, 7, 8, 9, 16, 17, 31, 33, 64}) {
                        CK(cudaMemset(out, 0xff, size_t(kMaxN) * out_ld * 4));
                        p.x = x, p.n = n, p.out = out;
                        CK(launch(p));
                        CK(cudaMemcpy(hn.data(), out, hn.size() * 4, cudaMemcpyDeviceToHost));
                        for (int tok = 0; tok < n; ++tok)
                            if (memcmp(&hn[size_t(tok) * out_ld], &h1[size_t(tok) * out_ld], sh.rows * 4)) ++bad_bits;
                    }
                    int bad_forms = 0;
                    if (S == Ss.back()) {
                        if (form == 0) h0 = h1;
                        else
                            for (int tok = 0; tok < kMaxN; ++tok)
                                if (memcmp(&h0[size_t(tok) * out_ld], &h1[size_t(tok) * out_ld], sh.rows * 4)) ++bad_forms;
                    }
                    double max_err = 0, max_ref = 0;
                    for (int tok : {0, 5, 63}) {
                        for (int64_t r = 0; r < sh.rows; ++r) {
                            double a = 0;
                            const uint16_t *wr = &hw[r * sh.K];
                            const float *xr = &hx[size_t(tok) * x_ld];
                            for (int64_t k = 0; k < sh.K; ++k) a += double(bf16f(wr[k])) * xr[k];
                            max_err = std::max(max_err, std::fabs(a - h1[size_t(tok) * out_ld + r]));
                            max_ref = std::max(max_ref, std::fabs(a));
                        }
                    }
                    const double rel = max_err / max_ref;
                    const bool ok = bad_bits == 0 && bad_forms == 0 && rel < 2e-5;
                    if (!ok) ++failures;
                    printf("check %-8s form %d S=%2d RW=%d: token rows differing from the one-row call: %d, from the "
                           "other form: %d; max|err|/max|ref| vs double %.2e %s\n",
                           sh.name, form, S, rw, bad_bits, bad_forms, rel, ok ? "ok" : "FAIL");
                }
            }
        }
        if (!strcmp(sh.name, "odd")) {
            for (int l = 0; l < sh.layers; ++l) cudaFree(W[l]), cudaFree(Wp[l]);
            cudaFree(x), cudaFree(out), cudaFree(out1), cudaFree(outf);
            continue;
        }

        // ---- timing: rotate over the layers' weights ----------------------------------------------
        auto time_us = [&](auto &&launch_one) {
            for (int l = 0; l < sh.layers; ++l) launch_one(l);  // warm
            CK(cudaEventRecord(e0, st));
            for (int r = 0; r < reps; ++r)
                for (int l = 0; l < sh.layers; ++l) launch_one(l);
            CK(cudaEventRecord(e1, st));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            return 1000.0 * ms / (reps * sh.layers);
        };
        for (int pdl : {0, 1}) {
        g_pdl = pdl;
        printf("time %-8s launches %s\n", sh.name, pdl ? "with programmatic dependent launch" : "plain");
        LaunchCtx ctx;
        ctx.stream = st, ctx.sm_count = sm, ctx.pdl = pdl;
        const double fma1 = time_us([&](int l) {
            GemvParams g;
            g.w = W[l], g.rows = sh.rows, g.cols = sh.K, g.x = x, g.out = outf;
            CK(launch_gemv(g, ctx));
        });
        const double fma16 = time_us([&](int l) {
            GemvMultiParams m;
            m.g.w = W[l], m.g.rows = sh.rows, m.g.cols = sh.K, m.g.x = x, m.g.out = outf;
            m.n = 16, m.x_ld = x_ld, m.out_ld = out_ld;
            CK(launch_gemv_multi(m, ctx));
        });
        const double bytes = double(wn) * 2;
        printf("time %-8s FMA GEMV 1 row %.2f us (%.0f GB/s); FMA multi-row 16 rows %.2f us\n", sh.name, fma1,
               bytes / fma1 / 1e3, fma16);
        for (int form : {0})
        for (int S : Ss) {
            if (S < 4) continue;
            for (int rw : {1, 2, 4}) {
                printf("time %-8s tc form %d S=%2d RW=%d:", sh.name, form, S, rw);
                double t1 = 0;
                for (int n : {1, 4, 8, 16, 32, 64}) {
                    const double us = time_us([&](int l) {
                        TcParams p;
                        p.wp = Wp[l], p.rows = sh.rows, p.K = sh.K, p.x = x, p.x_ld = x_ld, p.n = n, p.out = out;
                        p.out_ld = out_ld, p.S = S;
                        CK(form ? launch_tcp(p, rw, st) : launch_tc(p, rw, st));
                    });
                    if (n == 1) t1 = us;
                    printf("  n=%d %.2f", n, us);
                    if (n == 1) printf(" (%.0f GB/s, %.2fx FMA)", bytes / us / 1e3, us / fma1);
                    if (n == 16) printf(" (%.2fx n=1, %.2fx FMA multi)", us / t1, us / fma16);
                }
                printf("\n");
            }
        }
        }
        g_pdl = false;
        for (int l = 0; l < sh.layers; ++l) cudaFree(W[l]), cudaFree(Wp[l]);
        cudaFree(x), cudaFree(out), cudaFree(out1), cudaFree(outf);
    }
    printf("%s: %d failing checks\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
