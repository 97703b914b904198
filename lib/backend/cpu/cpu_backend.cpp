#include "backend/cpu/cpu_backend.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_gdn.h"
#include "backend/cpu/cpu_ops.h"
#include "util/error.h"

namespace specla {

CpuBackend::CpuBackend(const ModelConfig &config, ModelWeights weights, int32_t n_threads)
    : config_(config), weights_(std::move(weights)),
      n_threads_(n_threads > 0 ? n_threads : std::max(1, omp_get_num_procs())) {}

std::unique_ptr<SequenceState> CpuBackend::create_state(const SessionLimits &limits) {
    const ModelConfig &c = config_;
    auto st = std::make_unique<CpuSequenceState>();
    st->capacity = std::max(std::max(limits.max_batch_tokens, limits.max_tree_nodes), 1);
    const size_t rows = size_t(st->capacity);
    st->recurrent.assign(size_t(c.num_layers * c.recurrent_state_floats_per_layer()), 0.f);
    st->conv.assign(size_t(c.num_layers * c.conv_cache_floats_per_layer()), 0.f);
    const InProjLayout lay(c);
    st->h.resize(rows * size_t(c.hidden_size));
    st->x.resize(rows * size_t(c.hidden_size));
    st->proj.resize(rows * size_t(lay.rows));
    st->mixed.resize(rows * size_t(c.conv_channels()));
    st->o.resize(size_t(c.num_v_heads) * size_t(c.head_v_dim) * rows);
    st->y.resize(rows * size_t(c.value_dim()));
    st->ffn.resize(rows * size_t(2 * c.intermediate_size));
    st->beta.resize(rows * size_t(c.num_v_heads));
    st->glog.resize(rows * size_t(c.num_v_heads));
    return st;
}

void CpuBackend::reset_state(SequenceState &state) {
    auto &st = static_cast<CpuSequenceState &>(state);
    std::fill(st.recurrent.begin(), st.recurrent.end(), 0.f);
    std::fill(st.conv.begin(), st.conv.end(), 0.f);
}

void CpuBackend::mix_chain(CpuSequenceState &st, int layer, int32_t n) {
    const ModelConfig &c = config_;
    const LayerWeights &L = weights_.layers[size_t(layer)];
    const InProjLayout lay(c);
    const int K = c.head_k_dim, V = c.head_v_dim, H = c.num_heads, HV = c.num_v_heads, W = c.conv_size;
    const int64_t CC = c.conv_channels(), P = lay.rows;

    // Projections of all n tokens: one pass over in_proj.
    cpu::linear(L.in_proj, st.x.data(), n, st.proj.data(), n_threads_);

    // Short causal conv + SiLU over the q|k|v channels, the window spilling into the conv cache.
    float *cache = st.conv.data() + size_t(layer) * size_t(c.conv_cache_floats_per_layer());
    const int nt = n_threads_;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * CC >= 4096)
    for (int64_t ch = 0; ch < CC; ++ch) {
        for (int32_t t = 0; t < n; ++t) {
            float acc;
            if (c.use_short_conv) {
                acc = 0.f;
                const float *w = L.conv.data() + ch * W;
                for (int j = 0; j < W; ++j) {
                    const int32_t src = t - (W - 1) + j;  // position of the input tap j multiplies
                    const float in = src >= 0 ? st.proj[size_t(src * P + ch)]
                                              : cache[size_t((W - 1 + src) * CC + ch)];
                    acc += w[j] * in;
                }
            } else {
                acc = st.proj[size_t(t * P + ch)];
            }
            st.mixed[size_t(t * CC + ch)] = cpu::silu(acc);
        }
    }
    if (c.use_short_conv) {
        // New cache: the last W-1 pre-conv inputs of (old cache ++ these tokens).
        for (int r = 0; r < W - 1; ++r) {
            const int32_t src = n - (W - 1) + r;
            float *dst = cache + size_t(r) * CC;
            if (src >= 0) {
                for (int64_t ch = 0; ch < CC; ++ch) dst[ch] = st.proj[size_t(src * P + ch)];
            } else {
                std::memmove(dst, cache + size_t(W - 1 + src) * CC, size_t(CC) * 4);
            }
        }
    }

    // Per-token normalisation of q and k, gates of every value head.
    const float qscale = 1.f / std::sqrt(float(K));
    for (int32_t t = 0; t < n; ++t) {
        float *m = st.mixed.data() + size_t(t) * CC;
        for (int h = 0; h < H; ++h) {
            cpu::l2_normalize(m + h * K, K, qscale);                   // q
            cpu::l2_normalize(m + c.key_dim() + h * K, K, 1.f);        // k
        }
        const float *pr = st.proj.data() + size_t(t) * P;
        for (int hv = 0; hv < HV; ++hv) {
            st.glog[size_t(t * HV + hv)] = cpu::gdn_decay_log(pr[lay.a + hv], L.A_log[hv], L.dt_bias[hv]);
            st.beta[size_t(t * HV + hv)] = cpu::gdn_beta(pr[lay.b + hv], c.allow_neg_eigval);
        }
    }

    // The recurrence, value heads in parallel, tokens in order.
    float *S_layer = st.recurrent.data() + size_t(layer) * size_t(c.recurrent_state_floats_per_layer());
    const int group = c.v_heads_per_k_head();
#pragma omp parallel for schedule(static) num_threads(nt) if (HV > 1)
    for (int hv = 0; hv < HV; ++hv) {
        float *S = S_layer + size_t(hv) * K * V;
        const int kh = hv / group;
        for (int32_t t = 0; t < n; ++t) {
            const float *m = st.mixed.data() + size_t(t) * CC;
            float *o = st.o.data() + (size_t(t) * HV + hv) * V;
            cpu::gdn_step(S, K, V, m + kh * K, m + c.key_dim() + kh * K, m + 2 * c.key_dim() + hv * V,
                          st.beta[size_t(t * HV + hv)], st.glog[size_t(t * HV + hv)], o, nullptr);
            const float *z = c.use_gate ? st.proj.data() + size_t(t) * P + lay.g + hv * V : nullptr;
            cpu::gated_rmsnorm(o, L.o_norm.data(), z, V, c.norm_eps, st.y.data() + size_t(t) * c.value_dim() + hv * V);
        }
    }
}

void CpuBackend::eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows,
                            float *logits) {
    auto &st = static_cast<CpuSequenceState &>(state);
    require(n >= 1 && n <= st.capacity, SPECLA_ERR_INTERNAL, "eval_chain: block of ", n,
            " tokens exceeds the state's capacity ", st.capacity);
    const ModelConfig &c = config_;
    const int64_t D = c.hidden_size, I = c.intermediate_size;
    for (int32_t t = 0; t < n; ++t) weights_.embeddings.row_to_f32(tokens[t], st.h.data() + t * D);

    for (int l = 0; l < c.num_layers; ++l) {
        const LayerWeights &L = weights_.layers[size_t(l)];
        for (int32_t t = 0; t < n; ++t)
            cpu::rmsnorm(st.h.data() + t * D, L.attn_norm.data(), D, c.norm_eps, st.x.data() + t * D);
        mix_chain(st, l, n);
        // h += o_proj(y): the product lands in x (free now), then the residual add.
        cpu::linear(L.o_proj, st.y.data(), n, st.x.data(), n_threads_);
        for (int64_t i = 0; i < n * D; ++i) st.h[size_t(i)] += st.x[size_t(i)];

        for (int32_t t = 0; t < n; ++t)
            cpu::rmsnorm(st.h.data() + t * D, L.mlp_norm.data(), D, c.norm_eps, st.x.data() + t * D);
        cpu::linear(L.gate_up, st.x.data(), n, st.ffn.data(), n_threads_);
        for (int32_t t = 0; t < n; ++t) {
            float *gu = st.ffn.data() + size_t(t) * 2 * I;  // [gate | up] -> silu(gate) * up in place
            for (int64_t i = 0; i < I; ++i) gu[i] = cpu::silu(gu[i]) * gu[I + i];
        }
        // down(act): act rows live in the first I floats of each 2I-wide ffn row.
        cpu::linear(L.down, 0, D, st.ffn.data(), n, 2 * I, st.x.data(), D, n_threads_);
        for (int64_t i = 0; i < n * D; ++i) st.h[size_t(i)] += st.x[size_t(i)];
    }
    output_logits(st, n, rows, logits);
}

void CpuBackend::output_logits(CpuSequenceState &st, int32_t n, LogitsRows rows, float *logits) {
    if (rows == LogitsRows::None) return;
    const ModelConfig &c = config_;
    const int64_t D = c.hidden_size;
    const int32_t first = rows == LogitsRows::All ? 0 : n - 1;
    for (int32_t t = first; t < n; ++t)
        cpu::rmsnorm(st.h.data() + t * D, weights_.final_norm.data(), D, c.norm_eps, st.x.data() + t * D);
    const Matrix &out = weights_.output();
    cpu::linear(out, 0, out.rows, st.x.data() + first * D, n - first, D, logits, out.rows, n_threads_);
}

void CpuBackend::read_recurrent_state(SequenceState &state, int32_t layer, float *out) {
    auto &st = static_cast<CpuSequenceState &>(state);
    const ModelConfig &c = config_;
    const int K = c.head_k_dim, V = c.head_v_dim;
    const float *S = st.recurrent.data() + size_t(layer) * size_t(c.recurrent_state_floats_per_layer());
    for (int hv = 0; hv < c.num_v_heads; ++hv)
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) out[(size_t(hv) * V + j) * K + i] = S[(size_t(hv) * K + i) * V + j];
}

MemoryStats CpuBackend::memory_stats() const {
    MemoryStats m;
    auto add = [&](const Matrix &x) { m.weight_bytes += x.bytes(); };
    add(weights_.embeddings);
    add(weights_.lm_head);
    for (const auto &L : weights_.layers) add(L.in_proj), add(L.o_proj), add(L.gate_up), add(L.down);
    return m;
}

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig &config, ModelWeights weights, int32_t n_threads) {
    return std::make_unique<CpuBackend>(config, std::move(weights), n_threads);
}

}  // namespace specla
