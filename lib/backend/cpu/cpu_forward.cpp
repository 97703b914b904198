// The CPU backend's layer ops (forward/layer_ops.h): the model's layer program runs on the CPU
// through them. fp32 arithmetic; each row is computed on its own (the recurrence token by token
// or along its tree path, the projections row by row in a fixed order), so results do not depend
// on the number of rows in a pass nor on the thread count.
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_backend.h"
#include "backend/cpu/cpu_gdn.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tree.h"
#include "forward/layer_program.h"
#include "sampling/sampler.h"
#include "util/error.h"

namespace specla {

class CpuPassOps final : public LayerOps {
public:
    // `logits` receives the rows [pass.logits_from, n) (vocab floats each), `argmax` their argmax,
    // `features` the rows [pass.features_from, n) (host, hidden_size floats each).
    CpuPassOps(const CpuBackend &b, CpuSequenceState &st, float *logits, int32_t *argmax, float *features)
        : b_(b), c_(b.config_), w_(b.weights_), st_(st), logits_(logits), argmax_(argmax), features_(features) {}

    void input_rows(const Pass &pass) override;
    void mixer_in(int layer, const Pass &pass) override;
    void conv_gates(int layer, const Pass &pass) override;
    void recurrence(int layer, const Pass &pass) override;
    void mixer_out(int layer, const Pass &pass) override;
    void mlp_up(int layer, const Pass &pass) override;
    void mlp_down(int layer, const Pass &pass) override;
    void output_head(const Pass &pass) override;

private:
    // h += x over the pass's rows (the product of a projection lands in x).
    void add_residual(int32_t n) {
        const size_t count = size_t(n) * size_t(c_.hidden_size);
        for (size_t i = 0; i < count; ++i) st_.h[i] += st_.x[i];
    }
    void rmsnorm_rows(const float *w, int32_t from, int32_t n) {
        const int64_t D = c_.hidden_size;
        for (int32_t t = from; t < n; ++t) cpu::rmsnorm(st_.h.data() + t * D, w, D, c_.norm_eps, st_.x.data() + t * D);
    }

    const CpuBackend &b_;
    const ModelConfig &c_;
    const ModelWeights &w_;
    CpuSequenceState &st_;
    float *logits_;
    int32_t *argmax_;
    float *features_;
};

void CpuPassOps::input_rows(const Pass &pass) {
    const size_t D = size_t(c_.hidden_size);
    const int32_t n = pass.n;
    const bool drafter = !w_.fc.empty();
    require(drafter == (pass.features_in != nullptr), SPECLA_ERR_INTERNAL,
            drafter ? "a drafter model's pass needs every row's input feature"
                    : "input features given to a model that is not a drafter (no fc)");
    if (!drafter) {
        for (int32_t t = 0; t < n; ++t) cpu::packed_row_to_f32(w_.embeddings, pass.tokens[t], st_.h.data() + size_t(t) * D);
        return;
    }
    // Embedding first, then the feature (the drafter's training tool concatenates in this order).
    for (int32_t t = 0; t < n; ++t) {
        float *row = st_.row_in.data() + size_t(t) * 2 * D;
        cpu::packed_row_to_f32(w_.embeddings, pass.tokens[t], row);
        std::memcpy(row + D, pass.features_in + size_t(t) * D, D * sizeof(float));
    }
    cpu::linear(w_.fc, st_.row_in.data(), n, st_.h.data(), *st_.pool);
}

void CpuPassOps::mixer_in(int layer, const Pass &pass) {
    const LayerWeights &L = w_.layers[size_t(layer)];
    rmsnorm_rows(L.attn_norm.data(), 0, pass.n);
    cpu::linear(L.in_proj, st_.x.data(), pass.n, st_.proj.data(), *st_.pool);
}

void CpuPassOps::conv_gates(int layer, const Pass &pass) {
    const LayerWeights &L = w_.layers[size_t(layer)];
    const InProjLayout lay(c_);
    const int K = c_.head_k_dim, H = c_.num_heads, HV = c_.num_v_heads, W = c_.conv_size;
    const int64_t CC = c_.conv_channels(), P = lay.rows;
    const int32_t n = pass.n;
    const float *cache = st_.conv.data() + size_t(layer) * size_t(c_.conv_cache_floats_per_layer());

    // Short causal conv + SiLU over the q|k|v channels. A node's window is its own path: the
    // node, its parent, ..., then the conv cache (never its neighbours in node order).
    auto conv_nodes = [&](int64_t t_begin, int64_t t_end) {
      for (int32_t t = int32_t(t_begin); t < int32_t(t_end); ++t) {
        float *dst = st_.mixed.data() + size_t(t) * CC;
        if (!c_.use_short_conv) {
            for (int64_t ch = 0; ch < CC; ++ch) dst[ch] = cpu::silu(st_.proj[size_t(t * P + ch)]);
            continue;
        }
        const float *taps[64];  // conv_size is at most 64 (checked at load)
        int32_t cur = t, back = 0;
        for (int j = W - 1; j >= 0; --j) {  // tap j multiplies the input W-1-j steps back
            if (cur >= 0) {
                taps[j] = st_.proj.data() + size_t(cur) * P;
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
    if (int64_t(n) * CC >= 8192) st_.pool->parallel_for(n, conv_nodes);
    else conv_nodes(0, n);

    // Per-node normalisation of q and k, gates of every value head.
    const float qscale = 1.f / std::sqrt(float(K));
    for (int32_t t = 0; t < n; ++t) {
        float *m = st_.mixed.data() + size_t(t) * CC;
        for (int h = 0; h < H; ++h) {
            cpu::l2_normalize(m + h * K, K, qscale);
            cpu::l2_normalize(m + c_.key_dim() + h * K, K, 1.f);
        }
        const float *pr = st_.proj.data() + size_t(t) * P;
        for (int hv = 0; hv < HV; ++hv) {
            st_.glog[size_t(t * HV + hv)] = cpu::gdn_decay_log(pr[lay.a + hv], L.A_log[hv], L.dt_bias[hv]);
            st_.beta[size_t(t * HV + hv)] = cpu::gdn_beta(pr[lay.b + hv], c_.allow_neg_eigval);
        }
    }
    // A chain moves the conv cache on by its inputs (read above, so only now); a tree keeps the
    // pre-conv inputs as factors instead (recurrence()).
    if (!pass.is_tree()) b_.update_conv_cache(st_, layer, st_.proj.data(), P, nullptr, n);
}

// The CPU fuses the gated head norm into this op: the thread that owns a value head's state
// normalises its outputs while they are in cache.
void CpuPassOps::recurrence(int layer, const Pass &pass) {
    const LayerWeights &L = w_.layers[size_t(layer)];
    const InProjLayout lay(c_);
    const int K = c_.head_k_dim, V = c_.head_v_dim, HV = c_.num_v_heads;
    const int64_t CC = c_.conv_channels(), P = lay.rows, KD = c_.key_dim(), VD = c_.value_dim();
    const int32_t n = pass.n;
    const size_t F = size_t(st_.factor_capacity);
    CpuFactorSet *fs = pass.is_tree() ? &st_.factors : nullptr;
    const bool wy = pass.is_tree() && pass.algorithm == TreeAlgorithm::ParallelWY;

    float *S_layer = st_.recurrent.data() + size_t(layer) * size_t(c_.recurrent_state_floats_per_layer());
    const int group = c_.v_heads_per_k_head();
    const size_t head_scratch =
        pass.is_tree() ? (wy ? cpu::wy_scratch_floats(n, K, V) : size_t(pass.plan->n_snapshots + 1) * K * V) : 0;
    if (st_.tree_scratch.size() < head_scratch * HV) st_.tree_scratch.resize(head_scratch * HV);
    auto heads = [&](int64_t h_begin, int64_t h_end) {
      for (int hv = int(h_begin); hv < int(h_end); ++hv) {
        float *S = S_layer + size_t(hv) * K * V;
        const int kh = hv / group;
        // Deferred commit fused into this pass: the state is loaded here anyway.
        b_.apply_pending(st_, layer, hv, S);
        if (!fs) {
            for (int32_t t = 0; t < n; ++t) {
                const float *m = st_.mixed.data() + size_t(t) * CC;
                cpu::gdn_step(S, K, V, m + kh * K, m + KD + kh * K, m + 2 * KD + hv * V, st_.beta[size_t(t * HV + hv)],
                              st_.glog[size_t(t * HV + hv)], st_.o.data() + size_t(t) * VD + hv * V, nullptr);
            }
        } else {
            cpu::HeadInputs in{n,   K, V, pass.parents, st_.mixed.data() + kh * K, st_.mixed.data() + KD + kh * K,
                               st_.mixed.data() + 2 * KD + hv * V, CC, CC, CC, st_.beta.data() + hv,
                               st_.glog.data() + hv, HV};
            cpu::HeadOutputs out{st_.o.data() + hv * V, VD, fs->u.data() + size_t(layer) * F * VD + hv * V, VD};
            float *scratch = st_.tree_scratch.data() + size_t(hv) * head_scratch;
            if (wy) cpu::tree_recurrence_wy(S, in, out, scratch);
            else cpu::tree_recurrence_hybrid(*pass.plan, S, in, out, scratch);
        }
        for (int32_t t = 0; t < n; ++t) {
            const float *z = c_.use_gate ? st_.proj.data() + size_t(t) * P + lay.g + hv * V : nullptr;
            cpu::gated_rmsnorm(st_.o.data() + size_t(t) * VD + hv * V, L.o_norm.data(), z, V, c_.norm_eps,
                               st_.y.data() + size_t(t) * VD + hv * V);
        }
      }
    };
    st_.pool->parallel_for(HV, heads);
    if (fs) {
        // The factors that do not depend on the recurrence (keys, decays, pre-conv inputs) are
        // stored only now: the heads above read the deferred path's rows of this layer first.
        for (int32_t t = 0; t < n; ++t) {
            const size_t row = size_t(layer) * F + size_t(t);
            std::memcpy(fs->k.data() + row * KD, st_.mixed.data() + size_t(t) * CC + KD, size_t(KD) * sizeof(float));
            std::memcpy(fs->g.data() + row * HV, st_.glog.data() + size_t(t) * HV, size_t(HV) * sizeof(float));
            std::memcpy(fs->pre.data() + row * CC, st_.proj.data() + size_t(t) * P, size_t(CC) * sizeof(float));
        }
    }
}

void CpuPassOps::mixer_out(int layer, const Pass &pass) {
    // The head norm ran inside recurrence(): y holds the normalised, gated head outputs.
    cpu::linear(w_.layers[size_t(layer)].o_proj, st_.y.data(), pass.n, st_.x.data(), *st_.pool);
    add_residual(pass.n);
}

void CpuPassOps::mlp_up(int layer, const Pass &pass) {
    const LayerWeights &L = w_.layers[size_t(layer)];
    const int64_t I = c_.intermediate_size;
    rmsnorm_rows(L.mlp_norm.data(), 0, pass.n);
    cpu::linear(L.gate_up, st_.x.data(), pass.n, st_.ffn.data(), *st_.pool);
    for (int32_t t = 0; t < pass.n; ++t) {
        float *gu = st_.ffn.data() + size_t(t) * 2 * I;  // [gate | up] -> silu(gate) * up in place
        for (int64_t i = 0; i < I; ++i) gu[i] = cpu::silu(gu[i]) * gu[I + i];
    }
}

void CpuPassOps::mlp_down(int layer, const Pass &pass) {
    const int64_t D = c_.hidden_size, I = c_.intermediate_size;
    // The activation rows live in the first I floats of each 2I-wide ffn row.
    cpu::linear(w_.layers[size_t(layer)].down, 0, D, st_.ffn.data(), pass.n, 2 * I, st_.x.data(), D, *st_.pool);
    add_residual(pass.n);
}

void CpuPassOps::output_head(const Pass &pass) {
    const int64_t D = c_.hidden_size;
    const int32_t n = pass.n;
    if (features_ && pass.wants_features())
        std::memcpy(features_, st_.h.data() + size_t(pass.features_from) * D,
                    size_t(n - pass.features_from) * D * sizeof(float));
    if (!logits_ || !pass.wants_logits()) return;
    const int32_t first = pass.logits_from;
    rmsnorm_rows(w_.final_norm.data(), first, n);
    const Matrix &out = w_.output();
    cpu::linear(out, 0, out.rows, st_.x.data() + first * D, n - first, D, logits_, out.rows, *st_.pool);
    if (pass.argmax)
        for (int32_t t = first; t < n; ++t)
            argmax_[t - first] = argmax(logits_ + size_t(t - first) * size_t(out.rows), int32_t(out.rows));
}

void CpuBackend::run_pass(CpuSequenceState &st, const Pass &pass, float *logits, int32_t *argmax, float *features) {
    // Passes over as many nodes, of the same form and with the same logits, do the same work: the
    // pool times them as one kind, to run them inline while that is faster (util/thread_pool.h).
    // Logits rows of the pass: none, the last one, all, or another window (a verification's
    // first output row).
    const int32_t n = pass.n, from = pass.logits_from;
    const int32_t logit_rows = !logits || from >= n ? 0 : from == n - 1 ? 1 : from == 0 ? 2 : 3;
    const ThreadPool::PassScope timed(*st.pool, (int64_t(n) * 2 + pass.is_tree()) * 4 + int64_t(logit_rows));
    CpuPassOps ops(*this, st, logits, argmax, features);
    run_layer_program(ops, pass, config_.num_layers);
    // Every layer has applied the deferred path by now.
    st.pending_path.clear();
    st.commit.pending_applied();
}

}  // namespace specla
