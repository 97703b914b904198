// Speculative verification and commit on the device (the method: lib/engine/tree_recurrence.md):
//   * the token-mixer front end of a draft tree: short conv whose window follows each node's own
//     path (ancestors, then the committed conv cache), SiLU, the gates; pre-conv inputs and log
//     decays go straight into the factor rows;
//   * the recurrence over the tree, two exact schedules:
//       hybrid: heavy-light chains, one launch per dependency wave, every chain of a wave in
//       parallel with its state tile on chip for all of its nodes; only branch-point states are
//       written (snapshot slots); a chain is one launch with no intermediate state at all;
//       parallel WY: the tree-masked chunk form, one launch, Vt = T R with T = (I + A)^-1 solved by
//       forward substitution over ancestors on the residuals, outputs from S^T q and the masked
//       (q . k) products;
//   * commit without replay: the pending factors of an accepted path applied to the state (all
//     layers in one launch), and the conv caches rebuilt from the path's pre-conv inputs.
// Pending factors of a deferred commit are applied by the first kernel that loads a state tile
// (the verification kernels here, the decoding step's recurrent kernel): PendingFactors in
// launch_common.cuh, applied by gdn_tile_apply_pending in gdn_tile.cuh. The hybrid chains use
// gdn_tile_token with the decoding step's tile shape, so each node's outputs and residuals are
// bitwise those of plain decoding of its path.
// CPU reference: CpuBackend::verify_tree / commit_path (backend/cpu/cpu_backend.cpp) and
// cpu::tree_recurrence_hybrid / tree_recurrence_wy (backend/cpu/cpu_tree.h).
#pragma once

#include "launch_common.cuh"

namespace specla {
namespace kern {

// Front end of the tree's token mixer for one layer.
struct VerifyConvParams {
    int32_t n = 0;
    float *proj = nullptr;  // [n][R] raw in_proj outputs ([q|k|v|z|a|b]); z in place, see silu_z
    int64_t R = 0, CC = 0, row_a = 0, row_b = 0;
    // Window of node t: taps[t*(W-1) + m - 1] for the input m steps back (m = 1..W-1): a node
    // index >= 0, or -1 - r for row r of the conv cache.
    const int32_t *taps = nullptr;
    const float *conv_cache = nullptr;  // [W-1][CC] (read only)
    const float *conv_w = nullptr;      // [CC][W]
    int32_t W = 0, use_short_conv = 0, HV = 0;
    const float *A_log = nullptr, *dt_bias = nullptr;
    float beta_scale = 1.f;
    float *act = nullptr;   // [n][CC] post-conv SiLU outputs
    float *g = nullptr;     // [n][HV] log decays
    float *beta = nullptr;  // [n][HV]
    float *pre = nullptr;   // [n][CC] copy of the pre-conv inputs (null: not kept)
    // 1: the z columns [CC, row_a) of proj are replaced by silu(z), as the decoding step's in_proj
    // epilogue stores them (GemvParams::silu_z), so that o_proj's head norm takes its gate as is
    // (use_gate 2) instead of every CTA computing silu of every column of every node again.
    int32_t silu_z = 0;
    // Per-node conv windows (fixed-width drafting, beam_draft.cuh), for a pass whose nodes are all
    // children of the committed state: node t's cache rows are window window_in[t] of `windows`
    // ([slots][W-1][CC], oldest first; -1: conv_cache), and the node leaves its own window (that
    // window's newest W-2 rows, then its own input) in window window_out[t]. A node's two windows
    // are different slots. Null: every node reads conv_cache.
    const int32_t *window_in = nullptr, *window_out = nullptr;
    float *windows = nullptr;
};
cudaError_t launch_verify_conv(const VerifyConvParams &p, const LaunchCtx &ctx);

// The recurrence of one layer over the tree (both schedules). q, k, v: post-SiLU, not normalised
// (normalised here as in the decoding step).
struct TreeRecurrenceParams {
    int32_t n = 0, H = 0, HV = 0, K = 0, V = 0;
    float q_scale = 1.f;
    const float *act = nullptr;  // [n][act_ld]: q at h*K, k at H*K + h*K, v at 2*H*K + hv*V
    int64_t act_ld = 0;
    const float *g = nullptr, *beta = nullptr;  // [n][HV]
    float *state = nullptr;                     // [HV][V][K] committed state of the layer
    float *o = nullptr;                         // [n][HV*V]
    float *u_out = nullptr;                     // [n][HV*V] factor rows
    float *k_out = nullptr;                     // [n][H*K] factor rows (normalised keys)
    PendingFactors pending;                     // applied to the committed state first

    // Hybrid: chains of one wave. chain_info[3c..3c+2] = first index into chain_nodes, length,
    // start (-1: the committed state, else the snapshot slot of its start state). The wave's
    // first chain and chain count are read on the device, wave_info[2 wave] and [2 wave + 1], so
    // that one captured pass serves every tree whose waves fit its launch: chain_slots CTAs along
    // z (at least the wave's chains; the others exit) and chains of at most max_len nodes.
    const int32_t *chain_nodes = nullptr, *chain_info = nullptr, *wave_info = nullptr;
    int32_t wave = 0, chain_slots = 0;
    int32_t max_len = 0;  // bound on a chain's length (shared memory for its node list)
    const int32_t *snap_slot = nullptr;  // [n]: slot that receives the node's state, or -1
    float *snaps = nullptr;              // [slots][HV][V][K]

    // Parallel WY: parents [n] and, per node, the first of its ancestor pairs (pair_off[n] = total).
    const int32_t *parents = nullptr, *pair_off = nullptr;
    int32_t n_pairs = 0;
};
cudaError_t launch_tree_chains(const TreeRecurrenceParams &p, const LaunchCtx &ctx);
cudaError_t launch_tree_wy(const TreeRecurrenceParams &p, const LaunchCtx &ctx);
// Shared memory the WY kernel needs (0 if it cannot run this tree: fall back to hybrid).
size_t tree_wy_smem_bytes(int32_t n, int32_t n_pairs, int32_t K);

// Commit: the pending factors applied to every layer's state (one launch). `pending` describes
// layer 0; layer l's factor rows are at +l * the strides.
struct ApplyPendingParams {
    int32_t L = 0, H = 0, HV = 0, K = 0, V = 0;
    float *state = nullptr;
    int64_t state_layer = 0;  // floats per layer
    PendingFactors pending;                         // layer 0's factor rows
    int64_t k_layer = 0, g_layer = 0, u_layer = 0;  // floats between layers of the factor rows
};
cudaError_t launch_apply_pending(const ApplyPendingParams &p, const LaunchCtx &ctx);

// Commit: conv cache of every layer <- last W-1 pre-conv inputs of the path (desc as above)
// spilling into the old cache.
struct ConvCommitParams {
    int32_t L = 0, W = 0;
    int64_t CC = 0;
    float *cache = nullptr;
    int64_t cache_layer = 0;
    const float *pre = nullptr;  // [L][nodes][CC]
    int64_t pre_layer = 0;
    const int32_t *desc = nullptr;
};
cudaError_t launch_conv_commit(const ConvCommitParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
