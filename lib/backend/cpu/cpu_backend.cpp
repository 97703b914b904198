#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_gdn.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tree.h"
#include "sampling/sampler.h"
#include "util/cpu_count.h"
#include "util/error.h"
#include "util/log.h"

namespace specla {

// A forward pass over n nodes. A chain (parents == nullptr: node t follows node t-1) advances the
// committed state in place; a tree is verified against it without changing it.
struct CpuBackend::Pass {
    int32_t n = 0;
    const int32_t *parents = nullptr;  // null: chain
    bool verify = false;
    TreeAlgorithm algorithm = TreeAlgorithm::Hybrid;
    TreePlan plan;                // verify + hybrid
    int32_t parent(int32_t t) const { return parents ? parents[t] : t - 1; }
};

CpuBackend::CpuBackend(const ModelConfig &config, ModelWeights weights, int32_t n_threads)
    : config_(config), weights_(std::move(weights)) {
    const int usable = usable_cpus();
    n_threads_ = n_threads > 0 ? n_threads : usable;
    // Not clamped: results do not depend on the thread count, and a caller may know better
    // (tests, a quota this process cannot see); but it is almost always a mistake.
    if (n_threads_ > usable)
        log(SPECLA_LOG_WARN, "n_threads ", n_threads_, " is more than the ", usable,
            " CPUs this process may use (affinity mask, cgroup CPU quota): the extra threads only "
            "slow decoding down; 0 picks ", usable);
    // The products read BF16 weights in packed blocks (cpu_ops.h); embeddings too, as they may be
    // the output head, and their rows are gathered through packed_row_to_f32.
    cpu::pack_bf16_blocks(weights_.embeddings);
    cpu::pack_bf16_blocks(weights_.lm_head);
    cpu::pack_bf16_blocks(weights_.fc);
    for (LayerWeights &L : weights_.layers)
        for (Matrix *m : {&L.in_proj, &L.o_proj, &L.gate_up, &L.down}) cpu::pack_bf16_blocks(*m);
    require(weights_.fc.empty() || (weights_.fc.rows == config_.hidden_size && weights_.fc.cols == 2 * int64_t(config_.hidden_size)),
            SPECLA_ERR_INTERNAL, "drafter fc matrix is ", weights_.fc.rows, " x ", weights_.fc.cols, ", expected ",
            config_.hidden_size, " x ", 2 * int64_t(config_.hidden_size));
}

std::unique_ptr<SequenceState> CpuBackend::create_state(const SessionLimits &limits) {
    const ModelConfig &c = config_;
    auto st = std::make_unique<CpuSequenceState>();
    st->pool = std::make_unique<ThreadPool>(n_threads_);
    // A verification carries the not-yet-fed last token in front of the draft: one node more.
    st->factor_capacity = std::max(limits.max_tree_nodes, 1) + 1;
    st->capacity = std::max(std::max(limits.max_batch_tokens, 1), st->factor_capacity);
    const size_t rows = size_t(st->capacity), L = size_t(c.num_layers), F = size_t(st->factor_capacity);
    st->recurrent.assign(L * size_t(c.recurrent_state_floats_per_layer()), 0.f);
    st->conv.assign(L * size_t(c.conv_cache_floats_per_layer()), 0.f);
    const InProjLayout lay(c);
    st->h.resize(rows * size_t(c.hidden_size));
    st->x.resize(rows * size_t(c.hidden_size));
    st->proj.resize(rows * size_t(lay.rows));
    st->mixed.resize(rows * size_t(c.conv_channels()));
    st->o.resize(rows * size_t(c.value_dim()));
    st->y.resize(rows * size_t(c.value_dim()));
    st->ffn.resize(rows * size_t(2 * c.intermediate_size));
    st->beta.resize(rows * size_t(c.num_v_heads));
    st->glog.resize(rows * size_t(c.num_v_heads));
    st->step_logits.resize(size_t(c.vocab_size));
    if (!weights_.fc.empty()) st->row_in.resize(rows * 2 * size_t(c.hidden_size));
    CpuFactorSet &f = st->factors;
    f.k.resize(L * F * size_t(c.key_dim()));
    f.u.resize(L * F * size_t(c.value_dim()));
    f.g.resize(L * F * size_t(c.num_v_heads));
    f.pre.resize(L * F * size_t(c.conv_channels()));
    return st;
}

void CpuBackend::reset_state(SequenceState &state) {
    auto &st = static_cast<CpuSequenceState &>(state);
    std::fill(st.recurrent.begin(), st.recurrent.end(), 0.f);
    std::fill(st.conv.begin(), st.conv.end(), 0.f);
    st.pending.clear();
    st.verified = false;
}

// S <- exp(g_t) S + k_t u_t^T for each pending path node, in path order.
void CpuBackend::apply_pending(CpuSequenceState &st, int layer, int hv, float *S) const {
    if (st.pending.empty()) return;
    const ModelConfig &c = config_;
    const CpuFactorSet &f = st.factors;
    const size_t F = size_t(st.factor_capacity);
    const int kh = hv / c.v_heads_per_k_head();
    for (int32_t node : st.pending) {
        const size_t row = size_t(layer) * F + size_t(node);
        cpu::gdn_apply_factor(S, c.head_k_dim, c.head_v_dim, f.k.data() + row * c.key_dim() + kh * c.head_k_dim,
                              f.u.data() + row * c.value_dim() + hv * c.head_v_dim,
                              f.g[row * c.num_v_heads + hv]);
    }
}

// The conv cache after feeding `n` inputs (rows[order[i]]) on top of the current cache.
void CpuBackend::update_conv_cache(CpuSequenceState &st, int layer, const float *rows, int64_t row_stride,
                                   const int32_t *order, int32_t n) const {
    const ModelConfig &c = config_;
    if (!c.use_short_conv) return;
    const int W = c.conv_size;
    const int64_t CC = c.conv_channels();
    float *cache = st.conv.data() + size_t(layer) * size_t(c.conv_cache_floats_per_layer());
    for (int r = 0; r < W - 1; ++r) {
        const int32_t src = n - (W - 1) + r;  // index into the fed inputs; negative: older cache row
        float *dst = cache + size_t(r) * CC;
        if (src >= 0) {
            const int32_t row = order ? order[src] : src;
            std::memcpy(dst, rows + row * row_stride, size_t(CC) * sizeof(float));
        } else {
            std::memmove(dst, cache + size_t(W - 1 + src) * CC, size_t(CC) * sizeof(float));
        }
    }
}

void CpuBackend::conv_and_gates(CpuSequenceState &st, int layer, const Pass &pass) {
    const ModelConfig &c = config_;
    const LayerWeights &L = weights_.layers[size_t(layer)];
    const InProjLayout lay(c);
    const int K = c.head_k_dim, H = c.num_heads, HV = c.num_v_heads, W = c.conv_size;
    const int64_t CC = c.conv_channels(), P = lay.rows;
    const int32_t n = pass.n;
    const float *cache = st.conv.data() + size_t(layer) * size_t(c.conv_cache_floats_per_layer());

    // Short causal conv + SiLU over the q|k|v channels. A node's window is its own path: the
    // node, its parent, ..., then the conv cache (never its neighbours in node order).
    auto conv_nodes = [&](int64_t t_begin, int64_t t_end) {
      for (int32_t t = int32_t(t_begin); t < int32_t(t_end); ++t) {
        float *dst = st.mixed.data() + size_t(t) * CC;
        if (!c.use_short_conv) {
            for (int64_t ch = 0; ch < CC; ++ch) dst[ch] = cpu::silu(st.proj[size_t(t * P + ch)]);
            continue;
        }
        const float *taps[64];  // conv_size is at most 64 (checked at load)
        int32_t cur = t, back = 0;
        for (int j = W - 1; j >= 0; --j) {  // tap j multiplies the input W-1-j steps back
            if (cur >= 0) {
                taps[j] = st.proj.data() + size_t(cur) * P;
                cur = pass.parent(cur);
            } else {
                ++back;
                taps[j] = cache + size_t(W - 1 - back) * CC;
            }
        }
        for (int64_t ch = 0; ch < CC; ++ch) {
            const float *w = L.conv.data() + ch * W;
            float acc = 0.f;
            for (int j = 0; j < W; ++j) acc += w[j] * taps[j][ch];
            dst[ch] = cpu::silu(acc);
        }
      }
    };
    if (int64_t(n) * CC >= 8192) st.pool->parallel_for(n, conv_nodes);
    else conv_nodes(0, n);

    // Per-node normalisation of q and k, gates of every value head.
    const float qscale = 1.f / std::sqrt(float(K));
    for (int32_t t = 0; t < n; ++t) {
        float *m = st.mixed.data() + size_t(t) * CC;
        for (int h = 0; h < H; ++h) {
            cpu::l2_normalize(m + h * K, K, qscale);
            cpu::l2_normalize(m + c.key_dim() + h * K, K, 1.f);
        }
        const float *pr = st.proj.data() + size_t(t) * P;
        for (int hv = 0; hv < HV; ++hv) {
            st.glog[size_t(t * HV + hv)] = cpu::gdn_decay_log(pr[lay.a + hv], L.A_log[hv], L.dt_bias[hv]);
            st.beta[size_t(t * HV + hv)] = cpu::gdn_beta(pr[lay.b + hv], c.allow_neg_eigval);
        }
    }
}

void CpuBackend::mix(CpuSequenceState &st, int layer, const Pass &pass) {
    const ModelConfig &c = config_;
    const LayerWeights &L = weights_.layers[size_t(layer)];
    const InProjLayout lay(c);
    const int K = c.head_k_dim, V = c.head_v_dim, HV = c.num_v_heads;
    const int64_t CC = c.conv_channels(), P = lay.rows, KD = c.key_dim(), VD = c.value_dim();
    const int32_t n = pass.n;

    cpu::linear(L.in_proj, st.x.data(), n, st.proj.data(), *st.pool);
    conv_and_gates(st, layer, pass);

    const size_t F = size_t(st.factor_capacity);
    CpuFactorSet *fs = pass.verify ? &st.factors : nullptr;
    if (!fs) update_conv_cache(st, layer, st.proj.data(), P, nullptr, n);

    float *S_layer = st.recurrent.data() + size_t(layer) * size_t(c.recurrent_state_floats_per_layer());
    const int group = c.v_heads_per_k_head();
    const size_t head_scratch =
        pass.verify ? (pass.algorithm == TreeAlgorithm::ParallelWY ? cpu::wy_scratch_floats(n, K, V)
                                                                    : size_t(pass.plan.n_snapshots + 1) * K * V)
                    : 0;
    if (st.tree_scratch.size() < head_scratch * HV) st.tree_scratch.resize(head_scratch * HV);
    auto heads = [&](int64_t h_begin, int64_t h_end) {
      for (int hv = int(h_begin); hv < int(h_end); ++hv) {
        float *S = S_layer + size_t(hv) * K * V;
        const int kh = hv / group;
        // Deferred commit fused into this pass: the state is loaded here anyway.
        apply_pending(st, layer, hv, S);
        if (!pass.verify) {
            for (int32_t t = 0; t < n; ++t) {
                const float *m = st.mixed.data() + size_t(t) * CC;
                cpu::gdn_step(S, K, V, m + kh * K, m + KD + kh * K, m + 2 * KD + hv * V, st.beta[size_t(t * HV + hv)],
                              st.glog[size_t(t * HV + hv)], st.o.data() + size_t(t) * VD + hv * V, nullptr);
            }
        } else {
            cpu::HeadInputs in{n,   K, V, pass.parents, st.mixed.data() + kh * K, st.mixed.data() + KD + kh * K,
                               st.mixed.data() + 2 * KD + hv * V, CC, CC, CC, st.beta.data() + hv,
                               st.glog.data() + hv, HV};
            cpu::HeadOutputs out{st.o.data() + hv * V, VD, fs->u.data() + size_t(layer) * F * VD + hv * V, VD};
            float *scratch = st.tree_scratch.data() + size_t(hv) * head_scratch;
            if (pass.algorithm == TreeAlgorithm::ParallelWY) cpu::tree_recurrence_wy(S, in, out, scratch);
            else cpu::tree_recurrence_hybrid(pass.plan, S, in, out, scratch);
        }
        for (int32_t t = 0; t < n; ++t) {
            const float *z = c.use_gate ? st.proj.data() + size_t(t) * P + lay.g + hv * V : nullptr;
            cpu::gated_rmsnorm(st.o.data() + size_t(t) * VD + hv * V, L.o_norm.data(), z, V, c.norm_eps,
                               st.y.data() + size_t(t) * VD + hv * V);
        }
      }
    };
    st.pool->parallel_for(HV, heads);
    if (fs) {
        // The factors that do not depend on the recurrence (keys, decays, pre-conv inputs) are
        // stored only now: the heads above read the deferred path's rows of this layer first.
        for (int32_t t = 0; t < n; ++t) {
            const size_t row = size_t(layer) * F + size_t(t);
            std::memcpy(fs->k.data() + row * KD, st.mixed.data() + size_t(t) * CC + KD, size_t(KD) * sizeof(float));
            std::memcpy(fs->g.data() + row * HV, st.glog.data() + size_t(t) * HV, size_t(HV) * sizeof(float));
            std::memcpy(fs->pre.data() + row * CC, st.proj.data() + size_t(t) * P, size_t(CC) * sizeof(float));
        }
    }
}

void CpuBackend::embed(CpuSequenceState &st, const int32_t *tokens, int32_t n, const float *features_in) {
    const size_t D = size_t(config_.hidden_size);
    const bool drafter = !weights_.fc.empty();
    require(drafter == (features_in != nullptr), SPECLA_ERR_INTERNAL,
            drafter ? "a drafter model's pass needs every row's input feature"
                    : "input features given to a model that is not a drafter (no fc)");
    if (!drafter) {
        for (int32_t t = 0; t < n; ++t) cpu::packed_row_to_f32(weights_.embeddings, tokens[t], st.h.data() + size_t(t) * D);
        return;
    }
    // Embedding first, then the feature (the drafter's training tool concatenates in this order).
    for (int32_t t = 0; t < n; ++t) {
        float *row = st.row_in.data() + size_t(t) * 2 * D;
        cpu::packed_row_to_f32(weights_.embeddings, tokens[t], row);
        std::memcpy(row + D, features_in + size_t(t) * D, D * sizeof(float));
    }
    cpu::linear(weights_.fc, st.row_in.data(), n, st.h.data(), *st.pool);
}

// The layers and the output head over the n rows of st.h (embed() fills them).
void CpuBackend::forward(CpuSequenceState &st, const Pass &pass, int32_t logits_from, float *logits,
                         int32_t features_from, float *features) {
    const ModelConfig &c = config_;
    const int64_t D = c.hidden_size, I = c.intermediate_size;
    const int32_t n = pass.n;
    // Passes over as many nodes, of the same form and with the same logits, do the same work: the
    // pool times them as one kind, to run them inline while that is faster (util/thread_pool.h).
    // Logits rows of the pass: none, the last one, all, or another window (a verification's
    // first_row).
    const int32_t logit_rows = !logits || logits_from >= n ? 0 : logits_from == n - 1 ? 1 : logits_from == 0 ? 2 : 3;
    const ThreadPool::PassScope timed(*st.pool, (int64_t(n) * 2 + pass.verify) * 4 + int64_t(logit_rows));
    for (int l = 0; l < c.num_layers; ++l) {
        const LayerWeights &L = weights_.layers[size_t(l)];
        for (int32_t t = 0; t < n; ++t)
            cpu::rmsnorm(st.h.data() + t * D, L.attn_norm.data(), D, c.norm_eps, st.x.data() + t * D);
        mix(st, l, pass);
        // h += o_proj(y): the product lands in x (free now), then the residual add.
        cpu::linear(L.o_proj, st.y.data(), n, st.x.data(), *st.pool);
        for (int64_t i = 0; i < n * D; ++i) st.h[size_t(i)] += st.x[size_t(i)];

        for (int32_t t = 0; t < n; ++t)
            cpu::rmsnorm(st.h.data() + t * D, L.mlp_norm.data(), D, c.norm_eps, st.x.data() + t * D);
        cpu::linear(L.gate_up, st.x.data(), n, st.ffn.data(), *st.pool);
        for (int32_t t = 0; t < n; ++t) {
            float *gu = st.ffn.data() + size_t(t) * 2 * I;  // [gate | up] -> silu(gate) * up in place
            for (int64_t i = 0; i < I; ++i) gu[i] = cpu::silu(gu[i]) * gu[I + i];
        }
        // down(act): act rows live in the first I floats of each 2I-wide ffn row.
        cpu::linear(L.down, 0, D, st.ffn.data(), n, 2 * I, st.x.data(), D, *st.pool);
        for (int64_t i = 0; i < n * D; ++i) st.h[size_t(i)] += st.x[size_t(i)];
    }
    // Every layer has applied the deferred path by now.
    st.pending.clear();

    if (features && features_from < n)
        std::memcpy(features, st.h.data() + size_t(features_from) * D, size_t(n - features_from) * D * sizeof(float));
    if (!logits || logits_from >= n) return;
    const int32_t first = logits_from;
    for (int32_t t = first; t < n; ++t)
        cpu::rmsnorm(st.h.data() + t * D, weights_.final_norm.data(), D, c.norm_eps, st.x.data() + t * D);
    const Matrix &out = weights_.output();
    cpu::linear(out, 0, out.rows, st.x.data() + first * D, n - first, D, logits, out.rows, *st.pool);
}

void CpuBackend::eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows, float *logits,
                            const RowFeatures &features) {
    auto &st = static_cast<CpuSequenceState &>(state);
    require(n >= 1 && n <= st.capacity, SPECLA_ERR_INTERNAL, "eval_chain: block of ", n,
            " tokens exceeds the state's capacity ", st.capacity);
    Pass pass;
    pass.n = n;
    st.verified = false;  // the state moves on: earlier verification results no longer apply
    embed(st, tokens, n, features.in);
    const int32_t logits_from = rows == LogitsRows::All ? 0 : rows == LogitsRows::Last ? n - 1 : n;
    forward(st, pass, logits_from, logits, 0, features.out);
}

int32_t CpuBackend::decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling, double u,
                                      float *logits) {
    auto &st = static_cast<CpuSequenceState &>(state);
    float *row = logits ? logits : st.step_logits.data();
    eval_chain(st, &token, 1, LogitsRows::Last, row);
    return sample_token(row, config_.vocab_size, sampling, u);
}

void CpuBackend::verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                             TreeAlgorithm algorithm, const VerifyOutputs &out) {
    auto &st = static_cast<CpuSequenceState &>(state);
    require(n >= 1 && n <= st.factor_capacity, SPECLA_ERR_INTERNAL, "verify_tree: ", n,
            " nodes exceed the session's max_tree_nodes capacity ", st.factor_capacity);
    Pass pass;
    pass.n = n;
    pass.parents = parents;
    pass.verify = true;
    pass.algorithm = algorithm == TreeAlgorithm::ParallelWY ? TreeAlgorithm::ParallelWY : TreeAlgorithm::Hybrid;
    require(out.first_row >= 0 && out.first_row < n, SPECLA_ERR_INTERNAL, "verify_tree: first output row ",
            out.first_row, " is outside [0, ", n, ")");
    if (pass.algorithm == TreeAlgorithm::Hybrid) pass.plan = TreePlan::build(parents, n);
    embed(st, tokens, n, out.features.in);
    const size_t vocab = size_t(config_.vocab_size);
    const int32_t first = out.first_row, m = n - first;
    float *logits = out.logits;
    if (!logits && out.argmax) {
        st.verify_logits.resize(size_t(m) * vocab);
        logits = st.verify_logits.data();
    }
    forward(st, pass, first, logits, first, out.features.out);
    if (out.argmax)
        for (int32_t t = 0; t < m; ++t) out.argmax[t] = argmax(logits + size_t(t) * vocab, int32_t(vocab));
    st.verified = true;
    st.verified_nodes = n;
}

void CpuBackend::commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred) {
    auto &st = static_cast<CpuSequenceState &>(state);
    require(st.verified, SPECLA_ERR_STATE, "no verified tree to commit from");
    for (int32_t i = 0; i < n; ++i)
        require(nodes[i] >= 0 && nodes[i] < st.verified_nodes, SPECLA_ERR_INTERNAL, "commit_path: node ", nodes[i],
                " is not in the verified tree");
    const ModelConfig &c = config_;
    const CpuFactorSet &f = st.factors;
    const size_t F = size_t(st.factor_capacity);
    // The conv cache takes the path's last pre-conv inputs now: it is tiny.
    for (int l = 0; l < c.num_layers; ++l)
        update_conv_cache(st, l, f.pre.data() + size_t(l) * F * c.conv_channels(), c.conv_channels(), nodes, n);
    st.pending.assign(nodes, nodes + n);
    st.verified = false;
    if (!deferred) flush_commit(st);
}

void CpuBackend::flush_commit(SequenceState &state) {
    auto &st = static_cast<CpuSequenceState &>(state);
    if (st.pending.empty()) return;
    const ModelConfig &c = config_;
    const int K = c.head_k_dim, V = c.head_v_dim;
    const int64_t units = int64_t(c.num_layers) * c.num_v_heads;
    st.pool->parallel_for(units, [&](int64_t u0, int64_t u1) {
        for (int64_t unit = u0; unit < u1; ++unit) {
            const int layer = int(unit / c.num_v_heads), hv = int(unit % c.num_v_heads);
            float *S = st.recurrent.data() + size_t(layer) * size_t(c.recurrent_state_floats_per_layer()) +
                       size_t(hv) * K * V;
            apply_pending(st, layer, hv, S);
        }
    });
    st.pending.clear();
}

namespace {

// One layer between the CPU layout [HV][K][V] and fla's [HV][V][K] (the canonical one).
void cpu_to_fla(const ModelConfig &c, const float *S, float *out) {
    const int K = c.head_k_dim, V = c.head_v_dim;
    for (int hv = 0; hv < c.num_v_heads; ++hv)
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) out[(size_t(hv) * V + j) * K + i] = S[(size_t(hv) * K + i) * V + j];
}

void fla_to_cpu(const ModelConfig &c, const float *in, float *S) {
    const int K = c.head_k_dim, V = c.head_v_dim;
    for (int hv = 0; hv < c.num_v_heads; ++hv)
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) S[(size_t(hv) * K + i) * V + j] = in[(size_t(hv) * V + j) * K + i];
}

}  // namespace

void CpuBackend::read_recurrent_state(SequenceState &state, int32_t layer, float *out) {
    auto &st = static_cast<CpuSequenceState &>(state);
    flush_commit(st);
    cpu_to_fla(config_, st.recurrent.data() + size_t(layer) * size_t(config_.recurrent_state_floats_per_layer()), out);
}

void CpuBackend::export_state(SequenceState &state, float *recurrent, float *conv) {
    auto &st = static_cast<CpuSequenceState &>(state);
    flush_commit(st);
    const size_t per_layer = size_t(config_.recurrent_state_floats_per_layer());
    for (int l = 0; l < config_.num_layers; ++l)
        cpu_to_fla(config_, st.recurrent.data() + size_t(l) * per_layer, recurrent + size_t(l) * per_layer);
    if (!st.conv.empty()) std::memcpy(conv, st.conv.data(), st.conv.size() * sizeof(float));
}

void CpuBackend::import_state(SequenceState &state, const float *recurrent, const float *conv) {
    auto &st = static_cast<CpuSequenceState &>(state);
    const size_t per_layer = size_t(config_.recurrent_state_floats_per_layer());
    for (int l = 0; l < config_.num_layers; ++l)
        fla_to_cpu(config_, recurrent + size_t(l) * per_layer, st.recurrent.data() + size_t(l) * per_layer);
    if (!st.conv.empty()) std::memcpy(st.conv.data(), conv, st.conv.size() * sizeof(float));
    st.pending.clear();
    st.verified = false;
}

MemoryStats CpuBackend::memory_stats() const {
    MemoryStats m;
    auto add = [&](const Matrix &x) { m.weight_bytes += x.bytes(); };
    add(weights_.embeddings);
    add(weights_.lm_head);
    add(weights_.fc);
    for (const auto &L : weights_.layers) add(L.in_proj), add(L.o_proj), add(L.gate_up), add(L.down);
    return m;
}

void CpuBackend::copy_state(SequenceState &from, SequenceState &to) {
    auto &a = static_cast<CpuSequenceState &>(from);
    auto &b = static_cast<CpuSequenceState &>(to);
    flush_commit(a);
    b.recurrent = a.recurrent;
    b.conv = a.conv;
    b.pending.clear();
    b.verified = false;
}

SessionMemory CpuBackend::session_memory(const SequenceState &state) const {
    const auto &st = static_cast<const CpuSequenceState &>(state);
    SessionMemory m;
    auto bytes = [](const HostVec<float> &v) { return v.capacity() * sizeof(float); };
    m.state_bytes = bytes(st.recurrent) + bytes(st.conv);
    m.factor_bytes = bytes(st.factors.k) + bytes(st.factors.u) + bytes(st.factors.g) + bytes(st.factors.pre) +
                     st.pending.capacity() * sizeof(int32_t);
    m.scratch_bytes = bytes(st.h) + bytes(st.x) + bytes(st.proj) + bytes(st.mixed) + bytes(st.o) + bytes(st.y) +
                      bytes(st.ffn) + bytes(st.beta) + bytes(st.glog) + bytes(st.tree_scratch) + bytes(st.verify_logits) +
                      bytes(st.step_logits) + bytes(st.row_in);
    m.host_bytes = m.state_bytes + m.factor_bytes + m.scratch_bytes;
    return m;
}

std::unique_ptr<Backend> CpuBackend::create_drafter_backend(const ModelConfig &config, ModelWeights own) const {
    require(config.hidden_size == config_.hidden_size && config.vocab_size == config_.vocab_size &&
                config.tie_word_embeddings == config_.tie_word_embeddings,
            SPECLA_ERR_INTERNAL, "drafter config does not match the target it shares the output head with");
    // Copies of this model's (packed) matrices, which the new backend does not pack again.
    own.embeddings = weights_.embeddings;
    own.final_norm = weights_.final_norm;
    own.lm_head = weights_.lm_head;
    return std::make_unique<CpuBackend>(config, std::move(own), n_threads_);
}

std::unique_ptr<Backend> create_cpu_backend(const ModelConfig &config, ModelWeights weights, int32_t n_threads) {
    return std::make_unique<CpuBackend>(config, std::move(weights), n_threads);
}

}  // namespace specla
