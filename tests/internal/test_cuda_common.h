// Shared helpers of the CUDA test files (test_cuda_*.cpp): device detection with a printed skip
// reason, fresh random seeds, device buffers, error measures.
#pragma once

#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"
#include "model/weights.h"
#include "support/stats.h"

#ifdef SPECLA_WITH_CUDA
#include <cuda_runtime_api.h>

#include "util/error.h"

namespace cudatest {

// True when a device this build can run on exists; otherwise `why` says what is missing.
inline bool gpu_available(std::string &why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        why = std::string("no usable CUDA driver/device (cudaGetDeviceCount: ") + cudaGetErrorName(e) + ")";
        return false;
    }
    if (n == 0) {
        why = "cudaGetDeviceCount reports no GPU";
        return false;
    }
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, 0) != cudaSuccess || p.major < 9) {
        why = std::string("device 0 (") + p.name + ") is not sm_90 or newer; kernels are built for sm_90a";
        return false;
    }
    return true;
}

// Skips the rest of the test case with a printed reason when there is no GPU.
#define CUDA_TEST_REQUIRE_GPU()                                  \
    do {                                                         \
        std::string why_;                                        \
        if (!::cudatest::gpu_available(why_)) {                  \
            MESSAGE("CUDA test skipped: " << why_);              \
            return;                                              \
        }                                                        \
    } while (0)

inline void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        FAIL_CHECK(what << ": " << cudaGetErrorName(e) << " " << cudaGetErrorString(e));
        throw specla::Error(SPECLA_ERR_DEVICE, what);
    }
}
#define CK(call) ::cudatest::ck((call), #call)

// A device copy of a host vector, freed on destruction.
template <typename T>
struct DevBuf {
    T *p = nullptr;
    size_t n = 0;
    explicit DevBuf(size_t count) : n(count) { CK(cudaMalloc(reinterpret_cast<void **>(&p), (count ? count : 1) * sizeof(T))); }
    explicit DevBuf(const std::vector<T> &h) : DevBuf(h.size()) { upload(h); }
    ~DevBuf() { (void)cudaFree(p); }
    DevBuf(const DevBuf &) = delete;
    DevBuf &operator=(const DevBuf &) = delete;
    void upload(const std::vector<T> &h) { CK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice)); }
    std::vector<T> download() const {
        std::vector<T> h(n);
        CK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
        return h;
    }
    // Fills with a NaN pattern (0xFF bytes) so unwritten outputs show.
    void poison() { CK(cudaMemset(p, 0xff, n * sizeof(T))); }
};

}  // namespace cudatest
#endif  // SPECLA_WITH_CUDA

namespace cudatest {

// A fresh seed per run (SPECLA_TEST_SEED, when set, replays one), printed so that a failure can
// be reproduced.
inline uint64_t fresh_seed(const char *what) {
    const uint64_t s = test::fresh_seed();
    MESSAGE(std::string(what) << ": seed " << s << " (set SPECLA_TEST_SEED to replay)");
    return s;
}

// max |a - b| / max |b| (the reference's scale, so near-zero entries do not dominate); NaN -> inf.
inline double max_rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        if (!(d == d)) return INFINITY;
        num = d > num ? d : num;
        den = std::fabs(double(b[i])) > den ? std::fabs(double(b[i])) : den;
    }
    return den > 0 ? num / den : num;
}
inline double max_rel(const std::vector<float> &a, const std::vector<float> &b) {
    REQUIRE(a.size() == b.size());
    return max_rel(a.data(), b.data(), a.size());
}

// Random model shapes of the CUDA tests, and the weights the GPU holds as the CPU reference sees
// them.
struct Shape {
    const char *name;
    int D, L, H, HV, K, V, I, vocab;
    bool gate = true, conv = true, neg = false, tied = false;
    float eps = 1e-6f;
};

inline specla::ModelConfig make_config(const Shape &s) {
    specla::ModelConfig c;
    c.vocab_size = s.vocab, c.hidden_size = s.D, c.num_layers = s.L, c.num_heads = s.H, c.num_v_heads = s.HV;
    c.head_k_dim = s.K, c.head_v_dim = s.V, c.conv_size = 4, c.intermediate_size = s.I, c.norm_eps = s.eps;
    c.use_gate = s.gate, c.use_short_conv = s.conv, c.allow_neg_eigval = s.neg, c.tie_word_embeddings = s.tied;
    c.bos_token_id = 1, c.eos_token_id = 2;
    return c;
}

inline void to_bf16(specla::Matrix &m) {
    if (m.empty() || m.type == specla::WeightType::BF16) return;
    specla::HostVec<uint16_t> b(m.f32.size());
    for (size_t i = 0; i < b.size(); ++i) b[i] = specla::f32_to_bf16(m.f32[i]);
    m.bf16 = std::move(b);
    m.f32.clear();
    m.type = specla::WeightType::BF16;
}

// The weights the GPU actually holds, for the CPU reference: every matrix (a drafter's fc too)
// rounded to bf16.
inline specla::ModelWeights bf16_rounded(specla::ModelWeights w) {
    to_bf16(w.embeddings);
    to_bf16(w.lm_head);
    to_bf16(w.fc);
    for (auto &L : w.layers) to_bf16(L.in_proj), to_bf16(L.o_proj), to_bf16(L.gate_up), to_bf16(L.down);
    return w;
}

}  // namespace cudatest
