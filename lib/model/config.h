// config.json of a Gated DeltaNet checkpoint (fla `gated_deltanet`), validated.
#pragma once

#include <cstdint>
#include <string>

namespace specla {

struct ModelConfig {
    int32_t vocab_size = 0;
    int32_t hidden_size = 0;        // D
    int32_t num_layers = 0;
    int32_t num_heads = 0;          // H: query/key heads
    int32_t num_v_heads = 0;        // HV: value heads, a multiple of H
    int32_t head_k_dim = 0;         // K
    int32_t head_v_dim = 0;         // V = K * expand_v
    int32_t conv_size = 0;          // W (kept even when use_short_conv is false)
    int32_t intermediate_size = 0;  // I
    float norm_eps = 1e-6f;
    int32_t bos_token_id = -1;
    int32_t eos_token_id = -1;
    bool use_gate = true;
    bool use_short_conv = true;
    bool allow_neg_eigval = false;
    bool tie_word_embeddings = false;

    // Derived widths. from_json_text checks every one of them in 64 bits against
    // SPECLA_LIMIT_MODEL_DIM, so these 32-bit products are exact for any loaded config.
    int32_t key_dim() const { return num_heads * head_k_dim; }       // width of q and k
    int32_t value_dim() const { return num_v_heads * head_v_dim; }   // width of v, g, o
    int32_t conv_channels() const { return 2 * key_dim() + value_dim(); }
    int32_t v_heads_per_k_head() const { return num_v_heads / num_heads; }
    // Sizes of one sequence's state, in floats.
    int64_t recurrent_state_floats_per_layer() const {
        return int64_t(num_v_heads) * head_k_dim * head_v_dim;
    }
    int64_t conv_cache_floats_per_layer() const {
        return use_short_conv ? int64_t(conv_size - 1) * conv_channels() : 0;
    }
    int64_t num_parameters() const;

    // Parse and validate; throws specla::Error naming the offending field: SPECLA_ERR_IO for a
    // file that cannot be read, SPECLA_ERR_FORMAT for a value no model has (not an integer, not
    // positive, beyond 32 bits, a token id outside [0, vocab_size), a non-finite float),
    // SPECLA_ERR_UNSUPPORTED for a size beyond a SPECLA_LIMIT_* of specla.h, including the
    // sizes derived from several fields (widths, per-sequence state, per-token memory).
    static ModelConfig from_file(const std::string &path);
    static ModelConfig from_json_text(const std::string &text, const std::string &origin);
};

}  // namespace specla
