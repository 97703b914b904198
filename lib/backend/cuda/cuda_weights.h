// The model's weights on the device: matrices in bf16 (F32 host matrices are rounded once, to
// nearest even), small vectors (norms, A_log, dt_bias, conv taps) in fp32. One cudaMalloc holds
// everything, each tensor 256-byte aligned.
#pragma once

#include <cstdint>
#include <vector>

#include "model/config.h"
#include "model/weights.h"

namespace specla {
namespace cuda {

struct DeviceLayer {
    const uint16_t *in_proj = nullptr, *o_proj = nullptr, *gate_up = nullptr, *down = nullptr;
    const float *attn_norm = nullptr, *conv = nullptr, *A_log = nullptr, *dt_bias = nullptr, *o_norm = nullptr,
                *mlp_norm = nullptr;
};

class DeviceWeights {
public:
    // Throws SPECLA_ERR_OUT_OF_MEMORY when the device cannot hold them.
    DeviceWeights(const ModelConfig &c, const ModelWeights &w, int device);
    ~DeviceWeights();
    DeviceWeights(const DeviceWeights &) = delete;
    DeviceWeights &operator=(const DeviceWeights &) = delete;

    const uint16_t *embeddings = nullptr;
    const uint16_t *lm_head = nullptr;  // == embeddings when tied
    const float *final_norm = nullptr;
    std::vector<DeviceLayer> layers;
    size_t bytes() const { return bytes_; }

private:
    void *base_ = nullptr;
    size_t bytes_ = 0;
    int device_ = 0;
};

}  // namespace cuda
}  // namespace specla
