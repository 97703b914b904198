// Speculative verification and commit on the CUDA backend (see kernels/gdn_verify.cuh for the
// device side and lib/engine/tree_recurrence.md for the method).
//
// A verification pass over the n nodes of a draft tree runs every projection as a multi-row GEMV
// (kernels/gemv_multi.cuh): fp32 activations, each node's reductions in exactly the order of the
// one-token decoding step, weights read once per pass. The conv windows follow each node's own
// path; the recurrence runs either as heavy-light chains (hybrid, one launch per dependency wave,
// the decoding step's tile arithmetic, so every node's logits are bitwise those of plain decoding
// of its root path) or in the tree-masked WY form (one launch, mathematically equal, not bitwise).
// The argmax of every node is taken on the device; logits cross to the host only when asked for.
//
// Commit keeps the per-node factors on the device: the conv caches are rebuilt from the path's
// pre-conv inputs at once; the recurrent state either at once (one launch over all layers) or,
// deferred, inside the next kernel that loads each state tile (the next verification's chains or
// WY, the decoding step's recurrent kernel, a block's recurrent kernel), through a pending-commit
// descriptor in device memory that the captured decoding step reads (count 0: nothing to do).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "engine/tree_plan.h"
#include "embedding.cuh"
#include "gdn_verify.cuh"
#include "gemv_multi.cuh"
#include "top_tokens.cuh"
#include "util/log.h"

namespace specla {
namespace cuda {

namespace {

// Trees whose hybrid plan needs more dependency waves than this go to the WY form under
// TreeAlgorithm::Auto. Hybrid is the bitwise-exact schedule (greedy speculative output equals
// plain greedy output token for token), so Auto keeps it for every tree a drafter of this project
// builds (a pending token + at most 8 levels: at most 9 waves); see auto_algorithm().
constexpr int32_t kAutoMaxHybridWaves = 16;

// The launch-shape rounding of a tree's hybrid schedule (verify_tree's graph key): trees whose
// counts round alike share a captured pass.
int32_t round_up_pow2(int32_t n) {
    int32_t r = 1;
    while (r < n) r *= 2;
    return r;
}
}  // namespace

void CudaBackend::init_verify(CudaSequenceState &st, const SessionLimits &limits) {
    const ModelConfig &c = config_;
    const size_t F = size_t(std::max(limits.max_tree_nodes, 1)) + 1;
    st.factor_rows = int32_t(F);
    const size_t L = size_t(c.num_layers), KD = size_t(c.key_dim()), VD = size_t(c.value_dim());
    const size_t HV = size_t(c.num_v_heads), CC = size_t(c.conv_channels());
    const bool conv = c.use_short_conv && c.conv_size > 1;
    auto al = [](size_t floats) { return (floats + 63) / 64 * 64; };
    // Floats per buffer, each padded to 64.
    const size_t keys_n = al(L * F * KD), decays_n = al(L * F * HV), residuals_n = al(L * F * VD),
                 preconv_n = conv ? al(L * F * CC) : 0;
    st.factor_buf =
        ArenaBuffer(*arena_, (2 * keys_n + 2 * decays_n + residuals_n + preconv_n) * 4, "speculative factors");
    float *b = st.factor_buf.as<float>();
    st.factor_keys[0] = b, st.factor_keys[1] = b + keys_n;
    st.factor_log_decays[0] = b + 2 * keys_n, st.factor_log_decays[1] = b + 2 * keys_n + decays_n;
    st.factor_residuals = b + 2 * keys_n + 2 * decays_n;
    st.factor_preconv = conv ? st.factor_residuals + residuals_n : nullptr;

    const TreeTableLayout tl(int32_t(F), c.conv_size);
    st.tree_tables_count = tl.total;
    const size_t act = al(F * CC), beta = al(F * HV), keys = al(F * 2), ints = al(tl.total), desc = al(2 + F);
    st.verify_buf = ArenaBuffer(*arena_, (act + beta + keys + ints + desc) * 4, "verification scratch");
    float *v = st.verify_buf.as<float>();
    st.verify_act = v;
    st.verify_beta = v + act;
    st.verify_argmax = reinterpret_cast<unsigned long long *>(v + act + beta);
    st.tree_tables = reinterpret_cast<int32_t *>(v + act + beta + keys);
    st.desc = reinterpret_cast<int32_t *>(v + act + beta + keys + ints);
    st.alloc_pinned(st.h_tree_tables, size_t(tl.total) * 4, "cudaHostAlloc");
    st.alloc_pinned(st.h_desc, (2 + F) * 4, "cudaHostAlloc");
    st.alloc_pinned(st.h_verify_argmax, F * 8, "cudaHostAlloc");
    const size_t top_n = F * size_t(kMaxTopTokens);
    st.top_buf = ArenaBuffer(*arena_, top_n * 8, "top tokens");
    st.top_ids = st.top_buf.as<int32_t>();
    st.top_logp = reinterpret_cast<float *>(st.top_ids + top_n);
    st.alloc_pinned(st.h_top_ids, top_n * 4, "cudaHostAlloc");
    st.alloc_pinned(st.h_top_logp, top_n * 4, "cudaHostAlloc");
    check(cudaEventCreateWithFlags(&st.desc_event, cudaEventDisableTiming), "cudaEventCreate");
    check(cudaMemsetAsync(st.desc, 0, (2 + F) * 4, st.stream), "cudaMemsetAsync(desc)");
}

kern::PendingFactors CudaBackend::pending_of(const CudaSequenceState &st, int layer) const {
    const ModelConfig &c = config_;
    const size_t F = size_t(st.factor_rows), l = size_t(layer);
    kern::PendingFactors pf;
    pf.desc = st.desc;
    for (int s = 0; s < 2; ++s) {
        pf.k[s] = st.factor_keys[s] + l * F * size_t(c.key_dim());
        pf.g[s] = st.factor_log_decays[s] + l * F * size_t(c.num_v_heads);
    }
    pf.u = st.factor_residuals + l * F * size_t(c.value_dim());
    return pf;
}

TreeAlgorithm CudaBackend::auto_algorithm(const int32_t *parents, int32_t n) const {
    // Rule, from bench_verify on the H200 (recurrence of all layers, device time): hybrid is 1.6-2.3x
    // faster than WY on chains and deep thin trees (1-2 waves: 17-node chain 0.63 vs 1.42 ms,
    // top-2/depth-12/16 nodes 0.66 vs 1.05 ms on GDN-1.3B) and ties at 4 waves (top-4/depth-4/32
    // nodes, 1.23-1.55 vs 1.51 ms): every wave is one more launch per layer, while WY is one launch
    // whatever the shape. Hybrid is also the bitwise-exact schedule, so Auto takes it up to
    // kAutoMaxHybridWaves waves and WY only for trees branching deeper than that.
    const TreePlan plan = TreePlan::build(parents, n);
    int32_t waves = 0;
    for (int32_t w : plan.waves) waves = std::max(waves, w + 1);
    return waves > kAutoMaxHybridWaves ? TreeAlgorithm::ParallelWY : TreeAlgorithm::Hybrid;
}

void CudaBackend::prepare_tree(CudaSequenceState &st, const int32_t *parents, int32_t n, TreeAlgorithm algorithm,
                               TreeLaunch &tl) {
    const ModelConfig &c = config_;
    const int32_t F = st.factor_rows, W = c.conv_size;
    const TreeTableLayout lay(F, W);
    int32_t *h = st.h_tree_tables;
    tl = TreeLaunch();
    tl.n = n;
    if (algorithm == TreeAlgorithm::Auto) algorithm = auto_algorithm(parents, n);
    std::memcpy(h + lay.parents, parents, size_t(n) * 4);
    // Conv windows along each node's path.
    if (c.use_short_conv && W > 1) {
        for (int32_t t = 0; t < n; ++t) {
            int32_t cur = t, depth = 0;
            for (int32_t m = 1; m <= W - 1; ++m) {
                if (cur >= 0) cur = parents[cur];
                int32_t v;
                if (cur >= 0) {
                    v = cur;
                    ++depth;
                } else {
                    const int32_t back = m - depth;  // cache rows back from the newest
                    v = -1 - (W - 1 - back);
                }
                h[lay.taps + size_t(t) * (W - 1) + size_t(m - 1)] = v;
            }
        }
    }
    // Ancestor pairs (WY).
    int32_t pairs = 0;
    for (int32_t v = 0; v < n; ++v) {
        h[lay.pair_off + size_t(v)] = pairs;
        for (int32_t u = parents[v]; u >= 0; u = parents[u]) ++pairs;
    }
    h[lay.pair_off + size_t(n)] = pairs;
    tl.n_pairs = pairs;
    tl.wy = algorithm == TreeAlgorithm::ParallelWY && kern::tree_wy_smem_bytes(n, pairs, c.head_k_dim) > 0;
    // Heavy-light chains grouped by wave.
    const TreePlan plan = TreePlan::build(parents, n);
    std::vector<int32_t> order(plan.chains.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = int32_t(i);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return plan.waves[size_t(a)] < plan.waves[size_t(b)]; });
    int32_t pos = 0, ci = 0, longest_chain = 1;
    for (int32_t idx : order) {
        const TreePlan::Chain &ch = plan.chains[size_t(idx)];
        const int32_t wave = plan.waves[size_t(idx)];
        if (tl.waves.size() <= size_t(wave)) tl.waves.push_back({ci, 0});
        tl.waves[size_t(wave)].second += 1;
        longest_chain = std::max(longest_chain, int32_t(ch.nodes.size()));
        h[lay.chain_info + 3 * size_t(ci)] = pos;
        h[lay.chain_info + 3 * size_t(ci) + 1] = int32_t(ch.nodes.size());
        h[lay.chain_info + 3 * size_t(ci) + 2] =
            ch.start_parent < 0 ? -1 : plan.snapshot_slot[size_t(ch.start_parent)];
        if (ch.start_parent < 0) ++tl.root_chains;
        for (int32_t v : ch.nodes) h[lay.chain_nodes + size_t(pos++)] = v;
        ++ci;
    }
    // Never past the factor rows (no chain is longer): the node lists of the longest chain a
    // session may verify must fit beside the stage (launch_tree_chains).
    tl.chain_len_bound = std::min(round_up_pow2(longest_chain), F);
    for (size_t w = 0; w < tl.waves.size(); ++w) {
        h[lay.wave_info + 2 * w] = tl.waves[w].first;
        h[lay.wave_info + 2 * w + 1] = tl.waves[w].second;
        tl.wave_slots.push_back(round_up_pow2(tl.waves[w].second));
    }
    for (int32_t v = 0; v < n; ++v) h[lay.snap + size_t(v)] = plan.snapshot_slot[size_t(v)];
    tl.n_snapshots = plan.n_snapshots;
    // Branch-point states of one layer (reused by every layer): grow on demand.
    if (!tl.wy && tl.n_snapshots > st.snap_slots) {
        check(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
        st.snap_buf.reset();
        st.snap_buf = ArenaBuffer(*arena_, size_t(tl.n_snapshots) * size_t(c.recurrent_state_floats_per_layer()) * 4,
                                  "hybrid branch-point states");
        st.snap_slots = tl.n_snapshots;
        st.clear_graphs();  // they hold the old snapshot address
    }
}

void CudaBackend::enqueue_tree_layer(CudaSequenceState &st, int layer, const TreeLaunch &tl, int set,
                                     const kern::LaunchCtx &ctx) {
    const ModelConfig &c = config_;
    const size_t F = size_t(st.factor_rows), l = size_t(layer);
    const TreeTableLayout lay(st.factor_rows, c.conv_size);
    kern::TreeRecurrenceParams rp;
    rp.n = tl.n, rp.H = c.num_heads, rp.HV = c.num_v_heads, rp.K = c.head_k_dim, rp.V = c.head_v_dim;
    rp.q_scale = 1.f / std::sqrt(float(c.head_k_dim));
    rp.act = st.verify_act, rp.act_ld = c.conv_channels();
    rp.g = st.factor_log_decays[set] + l * F * size_t(c.num_v_heads), rp.beta = st.verify_beta;
    rp.state = st.recurrent + l * size_t(c.recurrent_state_floats_per_layer());
    rp.o = st.o;
    rp.u_out = st.factor_residuals + l * F * size_t(c.value_dim());
    rp.k_out = st.factor_keys[set] + l * F * size_t(c.key_dim());
    rp.pending = pending_of(st, layer);
    rp.parents = st.tree_tables + lay.parents, rp.pair_off = st.tree_tables + lay.pair_off, rp.n_pairs = tl.n_pairs;
    rp.chain_nodes = st.tree_tables + lay.chain_nodes, rp.chain_info = st.tree_tables + lay.chain_info;
    rp.snap_slot = st.tree_tables + lay.snap, rp.snaps = st.snap_buf.as<float>();
    if (tl.wy) {
        check(kern::launch_tree_wy(rp, ctx), "tree recurrence (WY)");
        return;
    }
    rp.wave_info = st.tree_tables + lay.wave_info, rp.max_len = tl.chain_len_bound;
    for (size_t i = 0; i < tl.waves.size(); ++i) {
        rp.wave = int32_t(i), rp.chain_slots = tl.wave_slots[i];
        check(kern::launch_tree_chains(rp, ctx), "tree recurrence (chains)");
    }
}

void CudaBackend::verify_tree(SequenceState &state, const int32_t *tokens, const int32_t *parents, int32_t n,
                              TreeAlgorithm algorithm, const VerifyOutputs &out) {
    CudaSequenceState &st = cast(state);
    require(n >= 1 && n <= st.factor_rows, SPECLA_ERR_INTERNAL, "verify_tree: ", n,
            " nodes exceed the session's max_tree_nodes capacity ", st.factor_rows);
    require(out.first_row >= 0 && out.first_row < n, SPECLA_ERR_INTERNAL, "verify_tree: first output row ",
            out.first_row, " is outside [0, ", n, ")");
    const int64_t vocab = config_.vocab_size;
    const int32_t first = out.first_row;
    DeviceGuard g(device_);
    stage_features(st, out.features.in, n);
    st.commit.state_moved();

    TreeLaunch tl;
    prepare_tree(st, parents, n, algorithm, tl);
    // Several chains starting from the committed state would race on writing back the tile with
    // the pending factors applied: apply them in a separate pass first (never the case for a
    // session's trees, whose pending token is the single root).
    if (st.commit.pending() > 0 && !tl.wy && tl.root_chains > 1) flush_commit(st);
    const int set = 1 - st.last_set;  // the pending path (if any) is in last_set
    std::memcpy(st.h_tokens, tokens, size_t(n) * 4);

    Pass pass;
    pass.n = n;
    pass.tokens = st.h_tokens;
    pass.topology = PassTopology::Tree;
    pass.parents = parents;
    pass.algorithm = tl.wy ? TreeAlgorithm::ParallelWY : TreeAlgorithm::Hybrid;
    pass.features_in = out.features.in;
    pass.logits_from = first;
    pass.argmax = true;
    pass.features_from = out.features.out ? first : n;
    CudaPassPlan plan;
    plan.form = CudaPassForm::Tree;
    plan.pdl = options_.use_pdl;
    plan.tree = &tl;
    plan.set = set;
    // The launch shape: node count, factor set, schedule: WY's shared memory follows its pair
    // count; the hybrid schedule's launches, its bound on chain length and its waves' chain slots
    // (the tree itself, the waves' chains included, travels in the tables).
    std::vector<int32_t> key = {1, n, set, tl.wy ? 1 : 0, tl.wy ? tl.n_pairs : 0, int32_t(st.snap_slots)};
    if (!tl.wy) {
        key.push_back(tl.chain_len_bound);
        key.insert(key.end(), tl.wave_slots.begin(), tl.wave_slots.end());
    }
    launch_pass(st, pass, plan, key);
    st.commit.pending_applied();  // every layer applied the pending factors; the pass cleared the count
    if (out.logits)
        check(cudaMemcpyAsync(out.logits, st.logits + size_t(first) * size_t(vocab), size_t(n - first) * size_t(vocab) * 4,
                              cudaMemcpyDeviceToHost, st.stream),
              "copy logits");
    const int32_t top_k = out.top.k, rows = n - first;
    const size_t top_bytes = size_t(rows) * size_t(top_k) * 4;
    if (top_k > 0) {
        check_top_tokens(out.top, int32_t(vocab));
        check(kern::launch_top_tokens(st.logits + size_t(first) * size_t(vocab), vocab, rows, out.top.n_candidates,
                                      top_k, st.top_ids, st.top_logp, st.stream),
              "top tokens");
        copy_top_rows(st, top_bytes);
    }
    copy_features(st, first, n, out.features.out);
    check(cudaStreamSynchronize(st.stream), "verify_tree");
    if (out.argmax)
        for (int32_t t = first; t < n; ++t) out.argmax[t - first] = kern::argmax_key_id(st.h_verify_argmax[t]);
    if (top_k > 0) read_top_rows(st, out.top, top_bytes);
    st.last_set = set;
    st.commit.verified(n);
    st.verified_parents.assign(parents, parents + n);
}

void CudaBackend::commit_path(SequenceState &state, const int32_t *nodes, int32_t n, bool deferred) {
    CudaSequenceState &st = cast(state);
    st.commit.begin_commit(nodes, n);
    if (n <= 0) return;
    const ModelConfig &c = config_;
    DeviceGuard g(device_);
    check(cudaEventSynchronize(st.desc_event), "cudaEventSynchronize");  // h_desc free again
    st.h_desc[0] = n;
    st.h_desc[1] = st.last_set;
    std::memcpy(st.h_desc + 2, nodes, size_t(n) * 4);
    check(cudaMemcpyAsync(st.desc, st.h_desc, size_t(n + 2) * 4, cudaMemcpyHostToDevice, st.stream), "copy path");
    check(cudaEventRecord(st.desc_event, st.stream), "cudaEventRecord");
    if (st.factor_preconv && st.conv) {
        kern::ConvCommitParams cp;
        cp.L = c.num_layers, cp.W = c.conv_size, cp.CC = c.conv_channels();
        cp.cache = st.conv, cp.cache_layer = c.conv_cache_floats_per_layer();
        cp.pre = st.factor_preconv, cp.pre_layer = int64_t(st.factor_rows) * c.conv_channels();
        cp.desc = st.desc;
        kern::LaunchCtx ctx = launch_ctx(st.stream);
        ctx.pdl = false;
        check(kern::launch_conv_commit(cp, ctx), "conv cache commit");
    }
    if (!deferred) flush_commit(st);
}

void CudaBackend::flush_commit(SequenceState &state) {
    CudaSequenceState &st = cast(state);
    if (st.commit.pending() <= 0) return;
    const ModelConfig &c = config_;
    DeviceGuard g(device_);
    kern::ApplyPendingParams ap;
    ap.L = c.num_layers, ap.H = c.num_heads, ap.HV = c.num_v_heads, ap.K = c.head_k_dim, ap.V = c.head_v_dim;
    ap.state = st.recurrent, ap.state_layer = c.recurrent_state_floats_per_layer();
    ap.pending = pending_of(st, 0);
    const int64_t F = st.factor_rows;
    ap.k_layer = F * c.key_dim(), ap.g_layer = F * c.num_v_heads, ap.u_layer = F * c.value_dim();
    kern::LaunchCtx ctx = launch_ctx(st.stream);
    ctx.pdl = false;
    check(kern::launch_apply_pending(ap, ctx), "commit (apply factors)");
    check(cudaMemsetAsync(st.desc, 0, 4, st.stream), "clear pending");
    st.commit.pending_applied();
}

void CudaBackend::copy_state(SequenceState &from, SequenceState &to) {
    CudaSequenceState &a = cast(from), &b = cast(to);
    DeviceGuard g(device_);
    flush_commit(a);
    check(cudaStreamSynchronize(b.stream), "cudaStreamSynchronize");
    check(cudaMemcpyAsync(b.recurrent, a.recurrent, a.state_buf.bytes(), cudaMemcpyDeviceToDevice, a.stream),
          "copy state");
    if (a.conv) check(cudaMemcpyAsync(b.conv, a.conv, a.conv_buf.bytes(), cudaMemcpyDeviceToDevice, a.stream), "copy conv");
    check(cudaMemsetAsync(b.desc, 0, 4, a.stream), "clear pending");
    check(cudaStreamSynchronize(a.stream), "copy_state");
    b.commit.reset();
}

void CudaBackend::export_state(SequenceState &state, float *recurrent, float *conv) {
    CudaSequenceState &st = cast(state);
    DeviceGuard g(device_);
    flush_commit(st);
    // The device layout is the canonical one ([L][HV][V][K], [L][W-1][CC]): plain copies.
    check(cudaMemcpyAsync(recurrent, st.recurrent, st.state_buf.bytes(), cudaMemcpyDeviceToHost, st.stream),
          "cudaMemcpyAsync(export state)");
    if (st.conv)
        check(cudaMemcpyAsync(conv, st.conv, st.conv_buf.bytes(), cudaMemcpyDeviceToHost, st.stream),
              "cudaMemcpyAsync(export conv cache)");
    check(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize(export state)");
}

void CudaBackend::import_state(SequenceState &state, const float *recurrent, const float *conv) {
    CudaSequenceState &st = cast(state);
    DeviceGuard g(device_);
    check(cudaMemcpyAsync(st.recurrent, recurrent, st.state_buf.bytes(), cudaMemcpyHostToDevice, st.stream),
          "cudaMemcpyAsync(import state)");
    if (st.conv)
        check(cudaMemcpyAsync(st.conv, conv, st.conv_buf.bytes(), cudaMemcpyHostToDevice, st.stream),
              "cudaMemcpyAsync(import conv cache)");
    // The imported state has no deferred commit: the device-side pending count goes to 0 too.
    check(cudaMemsetAsync(st.desc, 0, 4, st.stream), "clear pending");
    // The caller's buffers are pageable and may be freed on return: wait for the copies.
    check(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize(import state)");
    st.commit.reset();
}

SessionMemory CudaBackend::session_memory(const SequenceState &state) const {
    const auto *p = dynamic_cast<const CudaSequenceState *>(&state);
    require(p != nullptr, SPECLA_ERR_INTERNAL, "a sequence state of another backend was passed to the CUDA backend");
    // As the arena accounts them: each allocation rounded up to its alignment.
    const size_t a = arena_->alignment();
    auto dev = [a](const ArenaBuffer &b) { return b.get() ? (b.bytes() + a - 1) / a * a : size_t(0); };
    SessionMemory m;
    m.state_bytes = dev(p->state_buf) + dev(p->conv_buf);
    m.factor_bytes = dev(p->factor_buf);
    m.scratch_bytes =
        dev(p->scratch_buf) + dev(p->verify_buf) + dev(p->top_buf) + dev(p->snap_buf) + dev(p->draft_buf);
    m.device_bytes = m.state_bytes + m.factor_bytes + m.scratch_bytes;
    m.scratch_bytes += p->pinned_bytes;
    m.host_bytes = p->pinned_bytes;
    return m;
}

void CudaBackend::synchronize(SequenceState &state) {
    CudaSequenceState &st = cast(state);
    DeviceGuard g(device_);
    check(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
}

}  // namespace cuda
}  // namespace specla
