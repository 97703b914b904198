#include "engine/model.h"

#include "model/checkpoint.h"
#include "model/drafter_checkpoint.h"
#include "util/error.h"
#include "util/log.h"

namespace specla {

std::shared_ptr<Model> Model::from_weights(const ModelConfig &config, ModelWeights weights,
                                           const ModelOptions &options) {
    auto m = std::make_shared<Model>();
    m->config_ = config;
    m->identity_ = identify_model(config, weights);  // before a backend converts the weights
    switch (options.backend) {
        case SPECLA_BACKEND_CPU:
            m->backend_ = create_cpu_backend(config, std::move(weights), options.n_threads);
            break;
        case SPECLA_BACKEND_CUDA:
            m->backend_ = create_cuda_backend(config, weights, options.device, options.arena_block_bytes);
            break;
        default:
            fail(SPECLA_ERR_INVALID_ARGUMENT, "unknown backend ", int(options.backend));
    }
    return m;
}

std::shared_ptr<Model> Model::load(const std::string &folder, const ModelOptions &options) {
    require(options.backend == SPECLA_BACKEND_CPU || options.backend == SPECLA_BACKEND_CUDA,
            SPECLA_ERR_INVALID_ARGUMENT, "unknown backend ", int(options.backend));
    auto ck = Checkpoint::open(folder);
    const ModelConfig config = ck->config();
    log(SPECLA_LOG_INFO, "loading ", folder, ": ", config.num_layers, " layers, hidden ", config.hidden_size,
        ", vocab ", config.vocab_size);
    ModelWeights weights = load_weights(*ck, options.progress);
    ck.reset();  // unmap the files: everything needed was converted
    return from_weights(config, std::move(weights), options);
}

std::unique_ptr<Backend> load_drafter_model(const std::string &folder, const Model &target) {
    DrafterCheckpoint d = load_drafter_checkpoint(folder, target.config());
    // A backend that cannot run drafter models refuses with SPECLA_ERR_UNSUPPORTED (Backend's default).
    return target.backend().create_drafter_backend(d.config, std::move(d.own));
}

}  // namespace specla
