// Fuzz target: config.json parsing and validation (lib/model/config.cpp). A refusal must be a
// clean status; a config that is accepted must have sizes the engine can compute with: every
// derived size below is evaluated, so UBSan reports any that overflows.
#include <cmath>
#include <string>

#include "fuzz_support.h"
#include "model/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const std::string text(reinterpret_cast<const char *>(data), size);
    specla::ModelConfig c;
    try {
        c = specla::ModelConfig::from_json_text(text, "config.json");
    } catch (const specla::Error &e) {
        fuzz::check_refusal(e);
        return 0;
    }
    if (c.vocab_size <= 0 || c.hidden_size <= 0 || c.num_layers <= 0 || c.num_heads <= 0 ||
        c.num_v_heads <= 0 || c.head_k_dim <= 0 || c.head_v_dim <= 0 || c.intermediate_size <= 0)
        fuzz::finding("accepted a config with a size that is not positive");
    if (c.num_v_heads % c.num_heads != 0) fuzz::finding("accepted num_v_heads not a multiple of num_heads");
    if (!std::isfinite(c.norm_eps) || c.norm_eps < 0) fuzz::finding("accepted a norm_eps that is not finite");
    if (c.bos_token_id < -1 || c.bos_token_id >= c.vocab_size || c.eos_token_id < -1 ||
        c.eos_token_id >= c.vocab_size)
        fuzz::finding("accepted a bos/eos id outside [-1, vocab_size)");
    volatile int64_t sink = 0;
    sink = sink + c.key_dim() + c.value_dim() + c.conv_channels() + c.v_heads_per_k_head();
    sink = sink + c.recurrent_state_floats_per_layer() + c.conv_cache_floats_per_layer();
    sink = sink + c.num_parameters();
    return 0;
}
