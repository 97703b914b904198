// bench_step_floor: the GDN-1.3B shape, the step's buffers and parameters, and the error check of
// the host code. Included by bench_step_floor.cu only.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include <cstdio>
#include <cstdlib>

namespace step_floor {

// ---- the GDN-1.3B shape (as bench/bench_decode.cpp builds it; target P1 in bench/RESULTS.md) ----
constexpr int kD = 2048, kLayers = 24, kHeads = 8, kDk = 256, kDv = 256, kI = 5632, kVocab = 32000;
constexpr int kVD = kHeads * kDv;               // value width, o_proj's input
constexpr int kR = 4 * kD + 2 * kHeads;         // in_proj rows: q, k, v, z, beta, decay
constexpr int kRowQ = 0, kRowK = kD, kRowV = 2 * kD, kRowZ = 3 * kD, kRowBeta = 4 * kD, kRowDecay = 4 * kD + kHeads;
constexpr float kEps = 1e-6f;

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

struct Layer {
    const uint16_t *in_proj, *o_proj, *gate_up, *down;  // bf16 [R][D], [D][VD], [2I][D], [D][I]
    const float *attn_norm, *ffn_norm, *head_norm;      // [D], [D], [Dv]
};

struct StepParams {
    Layer layers[kLayers];
    const uint16_t *lm_head, *emb;  // [V][D]
    const float *final_norm;        // [D]
    float *state;                   // [layers][heads][Dv][Dk]: value column c of a head is contiguous
    float *h, *qkv, *o, *act, *logits;
    unsigned long long *argmax;
    unsigned int *barrier;  // grows by gridDim.x per barrier; never reset
    unsigned int barrier_base;
    int token;
    int slots;     // ring depth
    int in_flight; // producer: slots requested and not landed, at most (0: no cap)
    int barriers;  // > 0: the step's grid barriers; diagnostics: 0 none, < 0 the stream alone
    int interleave; // 1: slots interleaved over the CTAs (Mat)
    int copy_kind; // 0: one bulk copy per slot (lane 0 of the producer warp); 1: 16-byte cp.async by all
                   // 32 lanes, each lane arriving on the slot's barrier when its copies land
};

// Resource layout of the persistent step (persistent_step.cuh), needed by the host too.
// Slot q of the step is consumed by warp q % kCW, and kCW divides the ring depth, so that every slot
// has one consumer warp: a warp never waits for a slot's next use before its previous use has landed
// (an mbarrier parity wait only tells the current phase from the one before it).
constexpr int kCW = 6;                    // consumer warps
constexpr int kConsumers = kCW * 32;
constexpr int kThreads = kConsumers + 32;  // + the producer warp
constexpr int kSlotBytes = 16 * 1024;
constexpr int kMaxSlots = 12;
constexpr int kColsPerWarp = 3;  // recurrence: value columns per warp (2048 / 132 SMs <= 16 per CTA)

}  // namespace step_floor
