// The model's weights in host memory, in the engine's layout: projections that read the same
// input are fused row-wise so a step reads each input once and launches one product for them.
//
//   in_proj  rows: [ q (H*K) | k (H*K) | v (HV*V) | g (HV*V, use_gate only) | a (HV) | b (HV) ]
//   gate_up  rows: [ gate (I) | up (I) ]
//   conv     [q|k|v channels][W] (tap j multiplies the input W-1-j steps back; gdn_math.md in
//            backend/cpu/ states the whole layer)
//
// Matrices keep the checkpoint's precision when it costs nothing: BF16 files stay BF16 (bf16 ->
// fp32 is exact, so the results equal an fp32 copy while reading half the bytes); F32 stays F32;
// F16 is widened to F32. Backends take these and build their own device copies.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "memory/host_alloc.h"
#include "model/config.h"

namespace specla {

class Checkpoint;

enum class WeightType { F32, BF16 };

struct Matrix {
    int64_t rows = 0, cols = 0;
    WeightType type = WeightType::F32;
    HostVec<float> f32;      // used when type == F32
    HostVec<uint16_t> bf16;  // used when type == BF16
    // BF16 rows rearranged into the CPU backend's block order (cpu::pack_bf16_blocks), which
    // packs a matrix once; a drafter's backend takes its copy of the shared head packed already.
    bool packed = false;

    bool empty() const { return rows == 0; }
    void allocate(int64_t r, int64_t c, WeightType t);
    // Row r as fp32 (for the embedding gather).
    void row_to_f32(int64_t r, float *out) const;
    size_t bytes() const { return size_t(rows * cols) * (type == WeightType::F32 ? 4 : 2); }
};

struct LayerWeights {
    HostVec<float> attn_norm;   // [D]
    Matrix in_proj;             // [2*H*K + (1+use_gate)*HV*V + 2*HV, D]
    HostVec<float> conv;        // [conv_channels * W], empty when !use_short_conv
    HostVec<float> A_log;       // [HV]
    HostVec<float> dt_bias;     // [HV]
    HostVec<float> o_norm;      // [V]
    Matrix o_proj;              // [D, HV*V]
    HostVec<float> mlp_norm;    // [D]
    Matrix gate_up;             // [2*I, D]
    Matrix down;                // [D, I]
};

// Row offsets inside in_proj.
struct InProjLayout {
    int64_t q, k, v, g, a, b, rows;
    explicit InProjLayout(const ModelConfig &c);
};

struct ModelWeights {
    Matrix embeddings;          // [vocab, D]
    std::vector<LayerWeights> layers;
    HostVec<float> final_norm;  // [D]
    Matrix lm_head;             // [vocab, D]; empty when tied (use embeddings)
    // Drafter models only (spec/eagle_drafter.md): a row starts from fc @ concat(embedding[token],
    // input feature) instead of the embedding. Empty for a target model.
    Matrix fc;                  // [D, 2D]

    const Matrix &output() const { return lm_head.empty() ? embeddings : lm_head; }
};

using ProgressFn = std::function<bool(float)>;  // return false to abort

// Build the weights from a checkpoint: checks presence, shape and dtype of every required tensor
// (SPECLA_ERR_SHAPE / SPECLA_ERR_UNSUPPORTED naming it), converts once, ignores extra tensors.
ModelWeights load_weights(const Checkpoint &ck, const ProgressFn &progress);
// The same checks for parts of a checkpoint (the drafter loader, model/drafter_checkpoint.h): one
// decoder layer under the names of `layer`, shaped by the checkpoint's config, and one [rows, cols]
// matrix.
LayerWeights load_layer_weights(const Checkpoint &ck, int32_t layer);
Matrix load_matrix(const Checkpoint &ck, const std::string &name, int64_t rows, int64_t cols);

// Random weights of a given shape (benchmarks and tests): deterministic for a seed, with scales
// that keep activations in a realistic range.
ModelWeights random_weights(const ModelConfig &c, uint64_t seed, WeightType type);
// One random [rows, cols] matrix, uniform in (-scale, scale), deterministic for a seed (a random
// drafter's fc in benchmarks).
Matrix random_matrix(int64_t rows, int64_t cols, WeightType type, float scale, uint64_t seed);

}  // namespace specla
