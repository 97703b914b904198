// C API: model loading, information, memory statistics.
#include <sys/stat.h>

#include "api/caller_enum.h"
#include "api/guard.h"
#include "api/handles.h"
#include "api/struct_size.h"
#include "engine/model.h"
#include "tokenizer/tokenizer.h"

using namespace specla;

namespace {
specla_model_params model_defaults() {
    specla_model_params p{};
    p.struct_size = sizeof p;
    p.backend = SPECLA_BACKEND_CPU;
    p.device = 0;
    p.n_threads = 0;
    p.arena_block_bytes = 0;
    p.progress_callback = nullptr;
    p.progress_user_data = nullptr;
    p.load_tokenizer = true;
    return p;
}
}  // namespace

extern "C" {

SPECLA_API specla_status specla_model_params_init(specla_model_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, model_defaults(), "specla_model_params"); });
}

SPECLA_API specla_status specla_model_load(const char *folder, const specla_model_params *caller_params,
                                           specla_model **out) {
    if (out) *out = nullptr;
    return guarded([&] {
        require_arg(folder, "folder");
        require_arg(out, "out");
        const specla_model_params params = read_params(caller_params, model_defaults(), "specla_model_params");
        require(params.n_threads >= 0, SPECLA_ERR_INVALID_ARGUMENT, "n_threads must not be negative");
        require(params.n_threads <= SPECLA_LIMIT_THREADS, SPECLA_ERR_INVALID_ARGUMENT, "n_threads (",
                params.n_threads, ") exceeds SPECLA_LIMIT_THREADS (", SPECLA_LIMIT_THREADS, ")");
        require(params.device >= 0, SPECLA_ERR_INVALID_ARGUMENT, "device must not be negative");
        const int backend = caller_enum(params.backend);
        require(backend == SPECLA_BACKEND_CPU || backend == SPECLA_BACKEND_CUDA, SPECLA_ERR_INVALID_ARGUMENT,
                "unknown backend ", backend);
        ModelOptions opts;
        opts.backend = specla_backend(backend);
        opts.device = params.device;
        opts.n_threads = params.n_threads;
        opts.arena_block_bytes = params.arena_block_bytes;
        if (params.progress_callback) {
            auto cb = params.progress_callback;
            void *ud = params.progress_user_data;
            opts.progress = [cb, ud](float f) { return cb(f, ud); };
        }
        auto handle = std::make_unique<specla_model>();
        handle->impl = Model::load(folder, opts);
        struct stat st {};
        const std::string tok_path = std::string(folder) + "/tokenizer.json";
        if (params.load_tokenizer && stat(tok_path.c_str(), &st) == 0) {
            handle->tokenizer = std::make_unique<specla_tokenizer>();
            handle->tokenizer->impl = Tokenizer::load(folder);
            handle->tokenizer->owned_by_model = true;
        }
        *out = handle.release();
    });
}

SPECLA_API void specla_model_free(specla_model *model) { delete model; }

SPECLA_API specla_status specla_model_get_info(const specla_model *model, specla_model_info *out) {
    return guarded([&] {
        require_arg(model, "model");
        require_arg(out, "out");
        const ModelConfig &c = model->impl->config();
        specla_model_info i{};
        i.vocab_size = c.vocab_size;
        i.hidden_size = c.hidden_size;
        i.num_layers = c.num_layers;
        i.num_heads = c.num_heads;
        i.num_v_heads = c.num_v_heads;
        i.head_k_dim = c.head_k_dim;
        i.head_v_dim = c.head_v_dim;
        i.conv_size = c.use_short_conv ? c.conv_size : 0;
        i.intermediate_size = c.intermediate_size;
        i.bos_token_id = c.bos_token_id;
        i.eos_token_id = c.eos_token_id;
        i.num_parameters = c.num_parameters();
        i.state_bytes = size_t(c.num_layers) *
                        size_t(c.recurrent_state_floats_per_layer() + c.conv_cache_floats_per_layer()) * sizeof(float);
        i.backend = model->impl->backend().kind();
        i.has_tokenizer = model->tokenizer != nullptr;
        write_info(out, i, "specla_model_info");
    });
}

SPECLA_API specla_status specla_model_memory_stats(const specla_model *model, specla_memory_stats *out) {
    return guarded([&] {
        require_arg(model, "model");
        require_arg(out, "out");
        const MemoryStats m = model->impl->backend().memory_stats();
        specla_memory_stats s{};
        s.weight_bytes = m.weight_bytes;
        s.arena_reserved_bytes = m.arena_reserved_bytes;
        s.arena_used_bytes = m.arena_used_bytes;
        s.arena_peak_bytes = m.arena_peak_bytes;
        s.arena_blocks = m.arena_blocks;
        s.live_allocations = m.live_allocations;
        write_info(out, s, "specla_memory_stats");
    });
}

}  // extern "C"
