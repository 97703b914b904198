// Fixed-width drafting by a drafter model on the device, every level in one captured graph
// (Backend::draft_fixed_width; the rule: TreeBuilder's fixed-width mode, spec/tree_builder.h).
//
// Level by level, a drafter's tree pass costs a plain step's fixed part plus a host round trip
// (about 0.1 ms at gdn-pycode-22m's size on the H200, most of a speculative pass: bench/journal
// 2026-12-03-gpu-speculation-floor-and-plan.md), and a separate catch-up block before them another
// round trip. Here the host hands over the accepted rows (or a root row) once and reads the
// finished levels once; in between, on the device:
//
//   catch-up (optional)                  the committed block of the accepted rows, as eval_chain
//                                        runs it; its last row's top tokens and feature are the
//                                        root row (else the host's root row is copied in)
//   root row, root feature, tree tables  -> (copies in)
//   beam step (level 1)                  the frontier of depth 1 and the first pass's inputs
//   for each level l = 1..levels:
//     level pass                         width rows as a tree of single-node chains: row b starts
//                                        from its parent's state slot (level 1: the committed
//                                        state) and its parent's conv window, leaves its own
//     top tokens                         width entries per row
//     beam step (level l + 1)            the next frontier and the next pass's inputs
//   counts, tokens, parents, rows        -> (copy out)
//
// Every node's arithmetic is the one verify_tree gives it when the drafter's levels are passed as
// trees over the committed state with their ancestors (snapshot slots are copies of the chain
// kernel's working tile, conv windows copies of the pre-conv inputs, the projections reduce each
// row in one order whatever the row count), so this is bitwise the level-by-level drafting on the
// same backend (tests/internal/test_cuda_eagle.cpp).
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.h"
#include "beam_draft.cuh"
#include "top_tokens.cuh"

namespace specla {
namespace cuda {

namespace {

// The pinned mirror's layout of FixedWidthDraft's outputs, in 4-byte words.
struct DraftOutLayout {
    size_t counts, tokens, parents, ids, logp, total;
    DraftOutLayout(int32_t W, int32_t levels) {
        const size_t w = size_t(W), l = size_t(levels);
        counts = 0;
        tokens = counts + l;
        parents = tokens + l * w;
        ids = parents + l * w;
        logp = ids + l * w * w;
        total = logp + l * w * w;
    }
};

}  // namespace

bool CudaBackend::supports_fixed_width_draft(int32_t width) const {
    // One layer: the snapshot slots hold one layer's state (a deeper drafter would need a slot set
    // per layer and per-layer chain starts).
    return is_drafter() && config_.num_layers == 1 && width >= 1 && width <= kMaxTopTokens &&
           int64_t(width) * width <= kern::kBeamMaxCandidates;
}

void CudaBackend::ensure_draft_buffers(CudaSequenceState &st, int32_t W, int32_t levels) {
    const ModelConfig &c = config_;
    const int32_t slots = 2 * W;
    const bool conv = c.use_short_conv && c.conv_size > 1;
    if (st.draft_width == W && st.draft_levels >= levels && st.snap_slots >= slots) return;
    // Buffers change address: finish what uses them and drop the graphs that hold them.
    check(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
    st.clear_graphs();
    if (st.snap_slots < slots) {
        st.snap_buf.reset();
        st.snap_buf = ArenaBuffer(*arena_, size_t(slots) * size_t(c.recurrent_state_floats_per_layer()) * 4,
                                  "hybrid branch-point states");
        st.snap_slots = slots;
    }
    const int32_t L = std::max(levels, st.draft_width == W ? st.draft_levels : 0);
    const size_t D = size_t(c.hidden_size), w = size_t(W);
    const DraftOutLayout out(W, L);
    auto al = [](size_t words) { return (words + 63) / 64 * 64; };
    const size_t root_n = al(2 * w + D), out_n = al(out.total), scores_n = al(size_t(L) * w), index_n = al(2 * w);
    const size_t windows_n = conv ? al(size_t(slots) * size_t(c.conv_size - 1) * size_t(c.conv_channels())) : 0;
    st.draft_buf.reset();
    st.draft_buf = ArenaBuffer(*arena_, (root_n + out_n + scores_n + index_n + windows_n) * 4, "drafting levels");
    int32_t *b = st.draft_buf.as<int32_t>();
    st.draft_root = b;
    st.draft_out = b + root_n;
    st.draft_scores = reinterpret_cast<float *>(b + root_n + out_n);
    st.draft_window_index = b + root_n + out_n + scores_n;
    st.draft_windows = conv ? reinterpret_cast<float *>(b + root_n + out_n + scores_n + index_n) : nullptr;
    if (st.h_draft_root) (void)cudaFreeHost(st.h_draft_root), st.pinned_bytes -= st.draft_root_count * 4;
    if (st.h_draft_out) (void)cudaFreeHost(st.h_draft_out), st.pinned_bytes -= st.draft_out_count * 4;
    st.h_draft_root = st.h_draft_out = nullptr;
    st.draft_root_count = 2 * w + D;
    st.draft_out_count = out.total;
    st.alloc_pinned(st.h_draft_root, st.draft_root_count * 4, "cudaHostAlloc(drafting root)");
    st.alloc_pinned(st.h_draft_out, st.draft_out_count * 4, "cudaHostAlloc(drafting levels)");
    st.draft_width = W;
    st.draft_levels = L;
}

void CudaBackend::enqueue_fixed_width_draft(CudaSequenceState &st, const TreeLaunch &tl, const FixedWidthDraft &d,
                                            int set, bool pdl) {
    const ModelConfig &c = config_;
    const int32_t W = d.width, levels = d.levels;
    const int64_t D = c.hidden_size, vocab = c.vocab_size;
    const DraftOutLayout out(W, st.draft_levels);
    const TreeTableLayout lay(st.factor_rows, c.conv_size);
    check(cudaMemcpyAsync(st.tree_tables, st.h_tree_tables, st.tree_tables_count * 4, cudaMemcpyHostToDevice,
                          st.stream),
          "copy tree tables");
    const int32_t m = d.catch_up_rows;
    if (m > 0) {
        // The catch-up: eval_chain's block of m rows (tokens and input features from the pinned
        // mirrors draft_fixed_width filled), its last row's top tokens and output feature left in
        // the root row on the device.
        Pass chain;
        chain.n = m;
        chain.tokens = st.h_tokens;
        chain.features_in = d.catch_up_features;
        chain.logits_from = m;
        chain.features_from = m;
        CudaPassPlan bp = block_plan(st, m);
        bp.pdl = pdl;
        bp.last_top_k = W, bp.last_top_candidates = d.n_candidates;
        bp.last_top_ids = st.draft_root, bp.last_top_logp = reinterpret_cast<float *>(st.draft_root + W);
        enqueue_pass(st, chain, bp);
        check(cudaMemcpyAsync(st.draft_root + 2 * W, st.h + size_t(m - 1) * size_t(D), size_t(D) * 4,
                              cudaMemcpyDeviceToDevice, st.stream),
              "copy root feature");
    } else {
        check(cudaMemcpyAsync(st.draft_root, st.h_draft_root, st.draft_root_count * 4, cudaMemcpyHostToDevice,
                              st.stream),
              "copy drafting root");
    }
    kern::LaunchCtx ctx = launch_ctx(st.stream);
    ctx.pdl = false;  // the beam steps follow copies or the top-token kernel

    int32_t *counts = st.draft_out + out.counts;
    kern::BeamStepParams bp;
    bp.width = W, bp.D = D;
    bp.pass_tokens = st.d_tokens, bp.row_in = st.row_in;
    bp.chain_info = st.tree_tables + lay.chain_info, bp.snap_slot = st.tree_tables + lay.snap;
    bp.window_in = st.draft_window_index, bp.window_out = st.draft_window_index + W;
    auto beam_step = [&](int32_t level) {  // the frontier of depth `level`
        const size_t l = size_t(level - 1);
        if (level == 1) {
            bp.ids = st.draft_root;
            bp.logp = reinterpret_cast<const float *>(st.draft_root + W);
            bp.features = reinterpret_cast<const float *>(st.draft_root + 2 * W);
        } else {
            bp.ids = st.draft_out + out.ids + (l - 1) * size_t(W) * size_t(W);
            bp.logp = reinterpret_cast<const float *>(st.draft_out + out.logp) + (l - 1) * size_t(W) * size_t(W);
            bp.scores_in = st.draft_scores + (l - 1) * size_t(W);
            bp.count_in = counts + (l - 1);
            bp.features = st.h;  // the previous level's output features, row by row
        }
        bp.level = level;
        bp.count_out = counts + l;
        bp.scores_out = st.draft_scores + l * size_t(W);
        bp.tokens_out = st.draft_out + out.tokens + l * size_t(W);
        bp.parents_out = st.draft_out + out.parents + l * size_t(W);
        check(kern::launch_beam_step(bp, ctx), "fixed-width drafting (beam step)");
    };

    DraftLevelPass dl;
    dl.window_in = st.draft_window_index, dl.window_out = st.draft_window_index + W;
    dl.windows = st.draft_windows;
    Pass pass;
    pass.n = W;
    pass.tokens = st.h_tokens;  // not read: the beam step wrote d_tokens
    pass.topology = PassTopology::Tree;
    pass.algorithm = TreeAlgorithm::Hybrid;
    pass.logits_from = 0;
    pass.features_from = W;
    CudaPassPlan plan;
    plan.form = CudaPassForm::Tree;
    plan.pdl = pdl;
    plan.tree = &tl;
    plan.set = set;
    plan.draft = &dl;

    beam_step(1);
    for (int32_t level = 1; level <= levels; ++level) {
        enqueue_pass(st, pass, plan);
        const size_t l = size_t(level - 1);
        check(kern::launch_top_tokens(st.logits, vocab, W, d.n_candidates, W,
                                      st.draft_out + out.ids + l * size_t(W) * size_t(W),
                                      reinterpret_cast<float *>(st.draft_out + out.logp) + l * size_t(W) * size_t(W),
                                      st.stream),
              "top tokens (drafting)");
        if (level < levels) beam_step(level + 1);
    }
    check(cudaMemcpyAsync(st.h_draft_out, st.draft_out, st.draft_out_count * 4, cudaMemcpyDeviceToHost, st.stream),
          "copy drafting levels");
    if (m > 0)
        check(cudaMemcpyAsync(st.h_draft_root, st.draft_root, st.draft_root_count * 4, cudaMemcpyDeviceToHost,
                              st.stream),
              "copy drafting root");
}

void CudaBackend::draft_fixed_width(SequenceState &state, const FixedWidthDraft &d) {
    CudaSequenceState &st = cast(state);
    require(supports_fixed_width_draft(d.width), SPECLA_ERR_UNSUPPORTED,
            "fixed-width drafting in one call needs a one-layer drafter model and width^2 <= ",
            kern::kBeamMaxCandidates, " (width ", d.width, ")");
    const int32_t W = d.width, m = d.catch_up_rows;
    check_fixed_width_draft(d, config_.vocab_size);
    require(W <= st.factor_rows && W <= st.capacity && m <= st.capacity, SPECLA_ERR_INTERNAL,
            "draft_fixed_width: width ", W, " and ", m, " catch-up rows do not fit a state of ", st.factor_rows,
            " tree rows and ", st.capacity, " block rows");
    DeviceGuard g(device_);
    ensure_draft_buffers(st, W, d.levels);
    // The previous call's copies out of the pinned mirrors are done (every call synchronises).
    const size_t D = size_t(config_.hidden_size), w = size_t(W);
    if (m > 0) {
        // A drafter never commits a tree, so nothing is pending; were it, the block would apply
        // it and the captured graph would have to clear the count: flushed first instead.
        if (st.commit.pending() > 0) flush_commit(st);
        stage_features(st, d.catch_up_features, m);
        std::memcpy(st.h_tokens, d.catch_up_tokens, size_t(m) * 4);
    } else {
        std::memcpy(st.h_draft_root, d.root_ids, w * 4);
        std::memcpy(st.h_draft_root + w, d.root_logp, w * 4);
        std::memcpy(st.h_draft_root + 2 * w, d.root_feature, D * 4);
    }

    // Every level is `width` children of the committed state as far as the tree tables go (one
    // wave of single-node chains, conv taps into the cache rows); the beam steps point each row at
    // its parent's state slot and conv window.
    const std::vector<int32_t> roots(w, -1);
    TreeLaunch tl;
    prepare_tree(st, roots.data(), W, TreeAlgorithm::Hybrid, tl);
    const int set = 1 - st.last_set;
    st.commit.state_moved();
    const std::vector<int32_t> key = {2, W, d.levels, d.n_candidates, set, st.snap_slots, st.draft_levels, m};
    launch_keyed(st, key, options_.use_pdl, "drafting graph",
                 [&](bool pdl) { enqueue_fixed_width_draft(st, tl, d, set, pdl); });
    check(cudaStreamSynchronize(st.stream), "draft_fixed_width");

    const DraftOutLayout out(W, st.draft_levels);
    const size_t levels = size_t(d.levels);
    const int32_t *h = st.h_draft_out;
    std::memcpy(d.counts, h + out.counts, levels * 4);
    std::memcpy(d.tokens, h + out.tokens, levels * w * 4);
    std::memcpy(d.parents, h + out.parents, levels * w * 4);
    std::memcpy(d.ids, h + out.ids, levels * w * w * 4);
    std::memcpy(d.logp, h + out.logp, levels * w * w * 4);
    if (m > 0) {
        std::memcpy(d.root_ids, st.h_draft_root, w * 4);
        std::memcpy(d.root_logp, st.h_draft_root + w, w * 4);
        std::memcpy(d.root_feature, st.h_draft_root + 2 * w, D * 4);
    }
    // No verification to commit: the passes were drafting (a drafter never commits a tree).
    st.last_set = set;
}

}  // namespace cuda
}  // namespace specla
