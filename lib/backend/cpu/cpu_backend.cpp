#include "backend/cpu/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_gdn.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/cpu_tree.h"
#include "engine/fixed_width_draft.h"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "util/cpu_count.h"
#include "util/error.h"
#include "util/log.h"

namespace specla {

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
    st->factor_capacity = CommitState::factor_rows(limits);
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
    st.pending_path.clear();
    st.commit.reset();
}

// S <- exp(g_t) S + k_t u_t^T for each pending path node, in path order.
void CpuBackend::apply_pending(CpuSequenceState &st, int layer, int hv, float *S) const {
    if (st.pending_path.empty()) return;
    const ModelConfig &c = config_;
    const CpuFactorSet &f = st.factors;
    const size_t F = size_t(st.factor_capacity);
    const int kh = hv / c.v_heads_per_k_head();
    for (int32_t node : st.pending_path) {
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

void CpuBackend::eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows, float *logits,
                            const RowFeatures &features, const TopTokens &last_top) {
    auto &st = static_cast<CpuSequenceState &>(state);
    require(n >= 1 && n <= st.capacity, SPECLA_ERR_INTERNAL, "eval_chain: block of ", n,
            " tokens exceeds the state's capacity ", st.capacity);
    const bool top = last_top.k > 0;
    if (top) check_top_tokens(last_top, config_.vocab_size);
    // The last row's top tokens are taken from its logits: into scratch when the caller wants none.
    if (top && (!logits || rows == LogitsRows::None)) {
        logits = st.step_logits.data();  // vocab floats, sized at creation
        rows = LogitsRows::Last;
    }
    st.commit.state_moved();
    Pass pass;
    pass.n = n;
    pass.tokens = tokens;
    pass.features_in = features.in;
    pass.logits_from = !logits || rows == LogitsRows::None ? n : rows == LogitsRows::Last ? n - 1 : 0;
    pass.features_from = features.out ? 0 : n;
    run_pass(st, pass, logits, nullptr, features.out);
    if (top) {
        const float *last = logits + (rows == LogitsRows::All ? size_t(n - 1) * size_t(config_.vocab_size) : 0);
        top_tokens(last, last_top.n_candidates, last_top.k, last_top.ids, last_top.logp);
    }
}

int32_t CpuBackend::decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling, double u,
                                      float *logits, float *features) {
    auto &st = static_cast<CpuSequenceState &>(state);
    float *row = logits ? logits : st.step_logits.data();
    RowFeatures rf;
    rf.out = features;
    eval_chain(st, &token, 1, LogitsRows::Last, row, rf);
    return sample_token(row, config_.vocab_size, sampling, u);
}

void CpuBackend::verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                             TreeAlgorithm algorithm, const VerifyOutputs &out) {
    auto &st = static_cast<CpuSequenceState &>(state);
    require(n >= 1 && n <= st.factor_capacity, SPECLA_ERR_INTERNAL, "verify_tree: ", n,
            " nodes exceed the session's max_tree_nodes capacity ", st.factor_capacity);
    require(out.first_row >= 0 && out.first_row < n, SPECLA_ERR_INTERNAL, "verify_tree: first output row ",
            out.first_row, " is outside [0, ", n, ")");
    Pass pass;
    pass.n = n;
    pass.tokens = tokens;
    pass.topology = PassTopology::Tree;
    pass.parents = parents;
    pass.algorithm = algorithm == TreeAlgorithm::ParallelWY ? TreeAlgorithm::ParallelWY : TreeAlgorithm::Hybrid;
    TreePlan plan;
    if (pass.algorithm == TreeAlgorithm::Hybrid) plan = TreePlan::build(parents, n);
    pass.plan = &plan;
    pass.features_in = out.features.in;
    const int32_t first = out.first_row;
    const bool top = out.top.k > 0;
    if (top) check_top_tokens(out.top, config_.vocab_size);
    pass.logits_from = out.logits || out.argmax || top ? first : n;
    pass.argmax = out.argmax != nullptr;
    pass.features_from = out.features.out ? first : n;
    // The argmax and the top tokens are taken from logits: into scratch when the caller wants
    // only those.
    const size_t V = size_t(config_.vocab_size);
    float *logits = out.logits;
    if (!logits && (out.argmax || top)) {
        st.verify_logits.resize(size_t(n - first) * V);
        logits = st.verify_logits.data();
    }
    run_pass(st, pass, logits, out.argmax, out.features.out);
    if (top) {
        const size_t k = size_t(out.top.k);
        for (int32_t r = 0; r < n - first; ++r)
            top_tokens(logits + size_t(r) * V, out.top.n_candidates, out.top.k, out.top.ids + size_t(r) * k,
                       out.top.logp + size_t(r) * k);
    }
    st.commit.verified(n);
}

void CpuBackend::commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred) {
    auto &st = static_cast<CpuSequenceState &>(state);
    st.commit.begin_commit(nodes, n);
    const ModelConfig &c = config_;
    const CpuFactorSet &f = st.factors;
    const size_t F = size_t(st.factor_capacity);
    // The conv cache takes the path's last pre-conv inputs now: it is tiny.
    for (int l = 0; l < c.num_layers; ++l)
        update_conv_cache(st, l, f.pre.data() + size_t(l) * F * c.conv_channels(), c.conv_channels(), nodes, n);
    st.pending_path.assign(nodes, nodes + n);
    if (!deferred) flush_commit(st);
}

void CpuBackend::flush_commit(SequenceState &state) {
    auto &st = static_cast<CpuSequenceState &>(state);
    if (st.pending_path.empty()) return;
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
    st.pending_path.clear();
    st.commit.pending_applied();
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
    st.pending_path.clear();
    st.commit.reset();
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
    b.pending_path.clear();
    b.commit.reset();
}

SessionMemory CpuBackend::session_memory(const SequenceState &state) const {
    const auto &st = static_cast<const CpuSequenceState &>(state);
    SessionMemory m;
    auto bytes = [](const HostVec<float> &v) { return v.capacity() * sizeof(float); };
    m.state_bytes = bytes(st.recurrent) + bytes(st.conv);
    m.factor_bytes = bytes(st.factors.k) + bytes(st.factors.u) + bytes(st.factors.g) + bytes(st.factors.pre) +
                     st.pending_path.capacity() * sizeof(int32_t);
    m.scratch_bytes = bytes(st.h) + bytes(st.x) + bytes(st.proj) + bytes(st.mixed) + bytes(st.o) + bytes(st.y) +
                      bytes(st.ffn) + bytes(st.beta) + bytes(st.glog) + bytes(st.tree_scratch) + bytes(st.verify_logits) +
                      bytes(st.step_logits) + bytes(st.row_in);
    m.host_bytes = m.state_bytes + m.factor_bytes + m.scratch_bytes;
    return m;
}

bool CpuBackend::supports_fixed_width_draft(int32_t width) const {
    return !weights_.fc.empty() && width >= 1 && width <= kMaxTopTokens;
}

void CpuBackend::draft_fixed_width(SequenceState &state, const FixedWidthDraft &draft) {
    require(supports_fixed_width_draft(draft.width), SPECLA_ERR_UNSUPPORTED,
            "fixed-width drafting needs a drafter model and a width of 1..", kMaxTopTokens, " (width ", draft.width,
            ")");
    draft_fixed_width_by_passes(*this, state, draft);
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
