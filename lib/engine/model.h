// A loaded model: its configuration and the backend that holds its weights. Immutable after
// loading, shared by all sessions (each session owns its state).
#pragma once

#include <memory>
#include <string>

#include "engine/backend.h"
#include "model/config.h"
#include "model/model_identity.h"
#include "model/weights.h"

namespace specla {

struct ModelOptions {
    specla_backend backend = SPECLA_BACKEND_CPU;
    int32_t device = 0;
    int32_t n_threads = 0;
    size_t arena_block_bytes = 0;
    ProgressFn progress;
};

class Model {
public:
    static std::shared_ptr<Model> load(const std::string &folder, const ModelOptions &options);
    // A model over weights built in memory (benchmarks, tests).
    static std::shared_ptr<Model> from_weights(const ModelConfig &config, ModelWeights weights,
                                               const ModelOptions &options);

    const ModelConfig &config() const { return config_; }
    Backend &backend() const { return *backend_; }
    // Which model this is, whatever the backend and options (session states check it on load).
    const ModelIdentity &identity() const { return identity_; }

private:
    ModelConfig config_;
    ModelIdentity identity_;
    std::unique_ptr<Backend> backend_;
};

// The drafter model of a drafter folder (model/drafter_checkpoint.h states its checks) for `target`:
// on a backend of the target's kind that shares the target's embeddings, final norm and output head
// (Backend::create_drafter_backend; CPU and CUDA targets). Throws SPECLA_ERR_UNSUPPORTED where the
// target's backend runs no drafter models.
std::unique_ptr<Backend> load_drafter_model(const std::string &folder, const Model &target);

}  // namespace specla
