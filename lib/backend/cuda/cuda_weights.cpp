#include "backend/cuda/cuda_weights.h"

#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_util.h"
#include "memory/host_alloc.h"
#include "model/safetensors.h"

namespace specla {
namespace cuda {

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// Two passes over the same list of tensors: first the sizes, then the copies.
struct Uploader {
    char *base = nullptr;  // null in the sizing pass
    size_t offset = 0;

    const uint16_t *matrix(const Matrix &m) {
        const size_t n = size_t(m.rows * m.cols);
        const size_t at = offset;
        offset += align256(n * 2);
        if (!base) return nullptr;
        if (m.type == WeightType::BF16) {
            SPECLA_CUDA_CHECK(cudaMemcpy(base + at, m.bf16.data(), n * 2, cudaMemcpyHostToDevice));
        } else {
            HostVec<uint16_t> tmp(n);
            for (size_t i = 0; i < n; ++i) tmp[i] = f32_to_bf16(m.f32[i]);
            SPECLA_CUDA_CHECK(cudaMemcpy(base + at, tmp.data(), n * 2, cudaMemcpyHostToDevice));
        }
        return reinterpret_cast<const uint16_t *>(base + at);
    }
    const float *vec(const HostVec<float> &v) {
        if (v.empty()) return nullptr;
        const size_t at = offset;
        offset += align256(v.size() * 4);
        if (!base) return nullptr;
        SPECLA_CUDA_CHECK(cudaMemcpy(base + at, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
        return reinterpret_cast<const float *>(base + at);
    }
};

}  // namespace

DeviceWeights::DeviceWeights(const ModelConfig &c, const ModelWeights &w, int device,
                             std::shared_ptr<const DeviceWeights> head)
    : head_(std::move(head)), device_(device) {
    DeviceGuard g(device);
    auto run = [&](Uploader &up) {
        if (head_) {
            embeddings = head_->embeddings;
            lm_head = head_->lm_head;
            final_norm = head_->final_norm;
        } else {
            embeddings = up.matrix(w.embeddings);
            lm_head = w.lm_head.empty() ? embeddings : up.matrix(w.lm_head);
            final_norm = up.vec(w.final_norm);
        }
        fc = w.fc.empty() ? nullptr : up.matrix(w.fc);
        layers.assign(size_t(c.num_layers), DeviceLayer{});
        for (int l = 0; l < c.num_layers; ++l) {
            const LayerWeights &L = w.layers[size_t(l)];
            DeviceLayer &d = layers[size_t(l)];
            d.attn_norm = up.vec(L.attn_norm);
            d.in_proj = up.matrix(L.in_proj);
            d.conv = up.vec(L.conv);
            d.A_log = up.vec(L.A_log);
            d.dt_bias = up.vec(L.dt_bias);
            d.o_norm = up.vec(L.o_norm);
            d.o_proj = up.matrix(L.o_proj);
            d.mlp_norm = up.vec(L.mlp_norm);
            d.gate_up = up.matrix(L.gate_up);
            d.down = up.matrix(L.down);
        }
    };
    Uploader sizing;
    run(sizing);
    bytes_ = sizing.offset;
    const cudaError_t e = cudaMalloc(&base_, bytes_);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        base_ = nullptr;
        size_t free_b = 0, total_b = 0;
        (void)cudaMemGetInfo(&free_b, &total_b);
        (void)cudaGetLastError();
        fail(SPECLA_ERR_OUT_OF_MEMORY, "CUDA device ", device, " cannot hold the model's weights: ", bytes_,
             " bytes needed, ", free_b, " free (", cudaGetErrorString(e), ")");
    }
    try {
        Uploader copy;
        copy.base = static_cast<char *>(base_);
        run(copy);
    } catch (...) {
        (void)cudaFree(base_);
        base_ = nullptr;
        throw;
    }
}

DeviceWeights::~DeviceWeights() {
    if (base_) {
        (void)cudaSetDevice(device_);  // no throwing guard in a destructor
        (void)cudaFree(base_);
    }
}

}  // namespace cuda
}  // namespace specla
