// A drafter folder (spec/eagle_drafter.md, "Drafter folder"): config.json (one fla
// gated_deltanet layer plus the `specla_drafter` block) and model.safetensors (fc.weight and the
// layer's tensors), validated against the target model it drafts for.
#pragma once

#include <string>

#include "model/config.h"
#include "model/weights.h"

namespace specla {

// The `specla_drafter` block of config.json.
struct DrafterInfo {
    std::string kind;            // "eagle"
    int32_t format_version = 0;  // 1
    int32_t feature_layer = 0;   // -1: the target's last hidden state (the only one so far)
    int32_t target_hidden_size = 0, target_vocab_size = 0, target_num_hidden_layers = 0;
};

struct DrafterCheckpoint {
    ModelConfig config;  // the drafter layer; tie_word_embeddings follows the target (its head)
    DrafterInfo info;
    ModelWeights own;    // fc and layers[0]; no embeddings, final norm or head (the target's)
};

// Reads and checks a drafter folder for `target`. Throws specla::Error naming the folder and the
// field or tensor: SPECLA_ERR_IO (no folder, no config.json, no model.safetensors),
// SPECLA_ERR_FORMAT (malformed JSON, a missing or mistyped field of the block),
// SPECLA_ERR_UNSUPPORTED (another kind, format version, feature layer, or more than one layer),
// SPECLA_ERR_SHAPE (hidden size, vocabulary or layer count of the target differ; a missing tensor
// or one of the wrong shape).
DrafterCheckpoint load_drafter_checkpoint(const std::string &folder, const ModelConfig &target);

}  // namespace specla
