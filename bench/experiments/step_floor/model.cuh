// bench_step_floor: random GDN-1.3B weights and state in device memory (one block for all weight
// matrices, so that a streaming read covers exactly the step's weights). Included by
// bench_step_floor.cu only.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include <cmath>
#include <vector>

#include "device_common.cuh"
#include "step_params.cuh"

namespace step_floor {

using namespace specla::kern;

__global__ void fill_bf16(uint16_t *w, int64_t n, uint64_t seed, float scale) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        uint64_t z = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        const float u = float(z >> 40) / float(1ull << 24) * 2.f - 1.f;
        w[i] = float_to_bf16(u * scale);
    }
}
__global__ void fill_f32(float *w, int64_t n, uint64_t seed, float scale, float offset) {
    for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
        uint64_t z = seed + uint64_t(i) * 0x9E3779B97F4A7C15ull;
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        z ^= z >> 31;
        w[i] = offset + (float(z >> 40) / float(1ull << 24) * 2.f - 1.f) * scale;
    }
}

struct Model {
    std::vector<void *> allocs;
    uint16_t *weights = nullptr;  // one block, so that a streaming read covers exactly the step's weights
    int64_t weight_elems = 0;
    StepParams p{};
    float *state_copy = nullptr;
    int64_t state_elems = int64_t(kLayers) * kHeads * kDv * kDk;

    template <typename T>
    T *alloc(int64_t n) {
        void *ptr = nullptr;
        CK(cudaMalloc(&ptr, size_t(n) * sizeof(T)));
        allocs.push_back(ptr);
        return static_cast<T *>(ptr);
    }
    ~Model() {
        for (void *a : allocs) cudaFree(a);
    }
    void build(uint64_t seed) {
        const int64_t per_layer = int64_t(kR) * kD + int64_t(kD) * kVD + 2ll * kI * kD + int64_t(kD) * kI;
        weight_elems = per_layer * kLayers + int64_t(kVocab) * kD;
        weights = alloc<uint16_t>(weight_elems);
        uint16_t *w = weights;
        auto take = [&](int64_t n, float scale) {
            fill_bf16<<<1024, 256>>>(w, n, seed += 0x1234567, scale);
            uint16_t *r = w;
            w += n;
            return r;
        };
        float *norms = alloc<float>(int64_t(kLayers) * (2 * kD + kDv) + kD);
        fill_f32<<<256, 256>>>(norms, int64_t(kLayers) * (2 * kD + kDv) + kD, seed + 99, 0.1f, 1.f);
        for (int l = 0; l < kLayers; ++l) {
            Layer &y = p.layers[l];
            y.in_proj = take(int64_t(kR) * kD, 1.f / std::sqrt(float(kD)) * 1.7f);
            y.o_proj = take(int64_t(kD) * kVD, 1.f / std::sqrt(float(kVD)) * 1.7f);
            y.gate_up = take(2ll * kI * kD, 1.f / std::sqrt(float(kD)) * 1.7f);
            y.down = take(int64_t(kD) * kI, 1.f / std::sqrt(float(kI)) * 1.7f);
            y.attn_norm = norms + int64_t(l) * (2 * kD + kDv);
            y.ffn_norm = y.attn_norm + kD;
            y.head_norm = y.ffn_norm + kD;
        }
        p.lm_head = take(int64_t(kVocab) * kD, 1.f / std::sqrt(float(kD)) * 1.7f);
        p.final_norm = norms + int64_t(kLayers) * (2 * kD + kDv);
        uint16_t *emb = alloc<uint16_t>(int64_t(kVocab) * kD);
        fill_bf16<<<1024, 256>>>(emb, int64_t(kVocab) * kD, seed + 7, 1.f);
        p.emb = emb;
        p.state = alloc<float>(state_elems);
        reset_state(seed);
        state_copy = alloc<float>(state_elems);
        p.h = alloc<float>(kD);
        p.qkv = alloc<float>(kR);
        p.o = alloc<float>(kVD);
        p.act = alloc<float>(kI);
        p.logits = alloc<float>(kVocab);
        p.argmax = alloc<unsigned long long>(1);
        p.barrier = alloc<unsigned int>(1);
        CK(cudaMemset(p.barrier, 0, 4));
        CK(cudaDeviceSynchronize());
    }
    // Random state values (the chains of bench_step_floor overwrite the state with values that are
    // not a model's; the persistent step's checks start from these).
    void reset_state(uint64_t seed) { fill_f32<<<1024, 256>>>(p.state, state_elems, seed + 11, 0.05f, 0.f); }
    double step_bytes() const { return double(weight_elems) * 2 + 2.0 * double(state_elems) * 4; }
};

}  // namespace step_floor
