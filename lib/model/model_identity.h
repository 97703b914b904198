// What makes two loaded models the same model for a session state (lib/session/session_state.md):
// the configuration the forward depends on, and a fingerprint of the weights. Computed once at load
// from the weights in the engine's layout before any backend converts them, so that the CPU and the
// CUDA copy of one checkpoint (and copies loaded with other thread counts) have one identity.
#pragma once

#include <cstdint>

#include "model/config.h"
#include "model/weights.h"

namespace specla {

struct ModelIdentity {
    uint64_t config_hash = 0;   // every ModelConfig field, in a fixed order
    uint64_t weights_hash = 0;  // sampled weight values (see model_identity.cpp)
    bool operator==(const ModelIdentity &o) const {
        return config_hash == o.config_hash && weights_hash == o.weights_hash;
    }
    bool operator!=(const ModelIdentity &o) const { return !(*this == o); }
};

ModelIdentity identify_model(const ModelConfig &config, const ModelWeights &weights);

}  // namespace specla
