#include "model/model_identity.h"

#include "util/checksum.h"

namespace specla {
namespace {

// Hashing every weight would cost a pass over gigabytes at each load; a fixed sample of every
// tensor (its size, its first and last values and a strided set in between) tells checkpoints apart
// just as well in practice (fine-tunes change all of them) at a cost independent of the model size.
constexpr int64_t kEdgeValues = 64, kStrided = 192;

template <typename T>
void sample(Checksum &h, const T *v, int64_t n) {
    h.add_value(n);
    if (n <= 2 * kEdgeValues + kStrided) {
        h.add(v, size_t(n) * sizeof(T));
        return;
    }
    h.add(v, size_t(kEdgeValues) * sizeof(T));
    h.add(v + n - kEdgeValues, size_t(kEdgeValues) * sizeof(T));
    const int64_t stride = (n - 2 * kEdgeValues) / kStrided;
    for (int64_t i = 0; i < kStrided; ++i) h.add_value(v[kEdgeValues + i * stride]);
}

void sample(Checksum &h, const HostVec<float> &v) { sample(h, v.data(), int64_t(v.size())); }

void sample(Checksum &h, const Matrix &m) {
    h.add_value(m.rows), h.add_value(m.cols), h.add_value(int32_t(m.type));
    if (m.type == WeightType::F32) sample(h, m.f32.data(), int64_t(m.f32.size()));
    else sample(h, m.bf16.data(), int64_t(m.bf16.size()));
}

}  // namespace

ModelIdentity identify_model(const ModelConfig &c, const ModelWeights &w) {
    ModelIdentity id;
    Checksum ch;
    for (int32_t v : {c.vocab_size, c.hidden_size, c.num_layers, c.num_heads, c.num_v_heads, c.head_k_dim,
                      c.head_v_dim, c.conv_size, c.intermediate_size, c.bos_token_id, c.eos_token_id})
        ch.add_value(v);
    ch.add_value(c.norm_eps);
    for (bool b : {c.use_gate, c.use_short_conv, c.allow_neg_eigval, c.tie_word_embeddings}) ch.add_value(uint8_t(b));
    id.config_hash = ch.value();

    Checksum wh;
    sample(wh, w.embeddings);
    sample(wh, w.lm_head);
    sample(wh, w.final_norm);
    for (const LayerWeights &L : w.layers) {
        for (const Matrix *m : {&L.in_proj, &L.o_proj, &L.gate_up, &L.down}) sample(wh, *m);
        for (const HostVec<float> *v : {&L.attn_norm, &L.conv, &L.A_log, &L.dt_bias, &L.o_norm, &L.mlp_norm})
            sample(wh, *v);
    }
    id.weights_hash = wh.value();
    return id;
}

}  // namespace specla
