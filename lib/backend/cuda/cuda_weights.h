// The model's weights on the device: matrices in bf16 (F32 host matrices are rounded once, to
// nearest even), small vectors (norms, A_log, dt_bias, conv taps) in fp32. One cudaMalloc holds
// everything, each tensor 256-byte aligned. A drafter model's weights (spec/eagle_drafter.md) hold
// its own tensors (fc and its layer) and point at the target's embeddings, final norm and output
// head, whose allocation they keep alive.
#pragma once

#include <cstdint>
#include <memory>
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
    // Throws SPECLA_ERR_OUT_OF_MEMORY when the device cannot hold them. With `head` (a drafter
    // model): the embeddings, final norm and output head are head's (w's are not read), and only
    // w's fc and layers are uploaded.
    DeviceWeights(const ModelConfig &c, const ModelWeights &w, int device,
                  std::shared_ptr<const DeviceWeights> head = nullptr);
    ~DeviceWeights();
    DeviceWeights(const DeviceWeights &) = delete;
    DeviceWeights &operator=(const DeviceWeights &) = delete;

    const uint16_t *embeddings = nullptr;
    const uint16_t *lm_head = nullptr;  // == embeddings when tied
    const float *final_norm = nullptr;
    const uint16_t *fc = nullptr;  // drafter models: [D][2D] (embedding | input feature); else null
    std::vector<DeviceLayer> layers;
    // This allocation's bytes (a drafter's shared head is the target's, not counted here).
    size_t bytes() const { return bytes_; }

private:
    std::shared_ptr<const DeviceWeights> head_;
    void *base_ = nullptr;
    size_t bytes_ = 0;
    int device_ = 0;
};

}  // namespace cuda
}  // namespace specla
