// bench_step_floor: the same math as the persistent skeleton, one plain kernel per operation
// (a warp per row, double-precision norms), to check the skeleton's values. Included by
// bench_step_floor.cu only.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include <cmath>

#include "device_common.cuh"
#include "step_params.cuh"

namespace step_floor {

using namespace specla::kern;

// ---- the reference: one plain kernel per op, same math ------------------------------------------
__global__ void ref_embed(const uint16_t *emb, int token, float *h) {
    for (int c = threadIdx.x + blockIdx.x * blockDim.x; c < kD; c += blockDim.x * gridDim.x)
        h[c] = bf16_to_float(emb[int64_t(token) * kD + c]);
}
// y = W (norm(x) or x); one warp per row. mode 0: plain; 1: RMSNorm with nw; 2: gated head norm
// (x = o, z = gate input, nw = head norm weights).
__global__ void ref_gemv(const uint16_t *W, int rows, int cols, const float *x, const float *nw, const float *z,
                         int mode, float *out, int epi) {
    extern __shared__ float xv[];
    __shared__ float hs[kHeads];
    __shared__ float tot;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    for (int c = tid; c < cols; c += blockDim.x) xv[c] = x[c];
    __syncthreads();
    if (mode == 1 && tid == 0) {
        double ss = 0;
        for (int c = 0; c < cols; ++c) ss += double(xv[c]) * xv[c];
        tot = float(1.0 / std::sqrt(ss / cols + kEps));
    }
    if (mode == 2 && tid < kHeads) {
        double ss = 0;
        for (int j = 0; j < kDv; ++j) ss += double(xv[tid * kDv + j]) * xv[tid * kDv + j];
        hs[tid] = float(1.0 / std::sqrt(ss / kDv + kEps));
    }
    __syncthreads();
    for (int c = tid; c < cols; c += blockDim.x) {
        if (mode == 1) xv[c] *= tot * nw[c];
        if (mode == 2) xv[c] *= hs[c / kDv] * nw[c % kDv] * (z[c] / (1.f + expf(-z[c])));
    }
    __syncthreads();
    const int nwarps = blockDim.x / 32;
    for (int r = blockIdx.x * nwarps + warp; r < rows; r += gridDim.x * nwarps) {
        float a = 0.f, b = 0.f;
        for (int c = lane; c < cols; c += 32) {
            a += bf16_to_float(W[int64_t(r) * cols + c]) * xv[c];
            if (epi == 2) b += bf16_to_float(W[int64_t(rows + r) * cols + c]) * xv[c];
        }
        a = warp_sum(a), b = warp_sum(b);
        if (lane == 0) {
            if (epi == 0) out[r] = a;
            else if (epi == 1) out[r] += a;
            else out[r] = a / (1.f + expf(-a)) * b;
        }
    }
}
__global__ void ref_recurrence(float *S, const float *qkv, float *o) {
    const int lane = threadIdx.x & 31;
    const int c = blockIdx.x * (blockDim.x / 32) + (threadIdx.x >> 5);
    if (c >= kVD) return;
    const int hd = c / kDv;
    double qq = 0, kk = 0;
    for (int i = 0; i < kDk; ++i) qq += double(qkv[kRowQ + hd * kDk + i]) * qkv[kRowQ + hd * kDk + i];
    for (int i = 0; i < kDk; ++i) kk += double(qkv[kRowK + hd * kDk + i]) * qkv[kRowK + hd * kDk + i];
    const float iq = float(1.0 / std::sqrt(qq + kEps) / std::sqrt(double(kDk))), ik = float(1.0 / std::sqrt(kk + kEps));
    const float beta = 1.f / (1.f + expf(-qkv[kRowBeta + hd]));
    const float g = 1.f / (1.f + expf(-(qkv[kRowDecay + hd] + 3.f)));
    float *col = S + int64_t(c) * kDk;
    float sk = 0.f;
    for (int i = lane; i < kDk; i += 32) sk += g * col[i] * qkv[kRowK + hd * kDk + i] * ik;
    sk = warp_sum(sk);
    const float u = beta * (qkv[kRowV + c] - sk);
    float oc = 0.f;
    for (int i = lane; i < kDk; i += 32) {
        const float s = g * col[i] + qkv[kRowK + hd * kDk + i] * ik * u;
        col[i] = s;
        oc += s * qkv[kRowQ + hd * kDk + i] * iq;
    }
    oc = warp_sum(oc);
    if (lane == 0) o[c] = oc;
}

void ref_step(const StepParams &p, float *S) {
    ref_embed<<<8, 256>>>(p.emb, p.token, p.h);
    for (int l = 0; l < kLayers; ++l) {
        const Layer &y = p.layers[l];
        float *Sl = S + int64_t(l) * kHeads * kDv * kDk;
        ref_gemv<<<264, 256, kD * 4>>>(y.in_proj, kR, kD, p.h, y.attn_norm, nullptr, 1, p.qkv, 0);
        ref_recurrence<<<kVD / 8, 256>>>(Sl, p.qkv, p.o);
        ref_gemv<<<264, 256, kVD * 4>>>(y.o_proj, kD, kVD, p.o, y.head_norm, p.qkv + kRowZ, 2, p.h, 1);
        ref_gemv<<<264, 256, kD * 4>>>(y.gate_up, kI, kD, p.h, y.ffn_norm, nullptr, 1, p.act, 2);
        ref_gemv<<<264, 256, kI * 4>>>(y.down, kD, kI, p.act, nullptr, nullptr, 0, p.h, 1);
    }
    ref_gemv<<<264, 256, kD * 4>>>(p.lm_head, kVocab, kD, p.h, p.final_norm, nullptr, 1, p.logits, 0);
}

}  // namespace step_floor
