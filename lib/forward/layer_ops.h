// The ops a backend implements so that the model's layer program (layer_program.h) runs on it:
// one op per stage of a Gated DeltaNet layer, at the granularity of today's kernels. An op acts
// on every row of the pass at once; how (one fused GEMV for a single row, a GEMM for a block,
// multi-row GEMVs for a tree) is the backend's choice. A backend may fuse a stage into its
// neighbour, in which case that op does nothing (it says so where it does).
//
// Activations live in the backend (its own scratch); the ops hand them to each other in place:
// the residual rows h, the in-projection rows, the mixer's head outputs, the MLP activations.
#pragma once

#include "forward/pass.h"

namespace specla {

class LayerOps {
public:
    virtual ~LayerOps() = default;

    // h[t] = embedding[token t], or for a drafter model fc @ concat(embedding, input feature).
    virtual void input_rows(const Pass &pass) = 0;
    // Token mixer, in projection: RMSNorm(h) @ in_proj -> q | k | v | gate | a | b rows.
    virtual void mixer_in(int layer, const Pass &pass) = 0;
    // Short causal conv + SiLU along each row's own path (its ancestors, then the conv cache),
    // q/k L2 norms, decay and beta gates; a chain also moves the conv cache on.
    virtual void conv_gates(int layer, const Pass &pass) = 0;
    // The gated delta rule over the pass's topology on top of the committed state (pending
    // factors applied first): a chain advances the state, a tree keeps per-row factors.
    virtual void recurrence(int layer, const Pass &pass) = 0;
    // Gated head RMSNorm of the mixer outputs, @ o_proj, added to h.
    virtual void mixer_out(int layer, const Pass &pass) = 0;
    // MLP: RMSNorm(h) @ gate_up, SwiGLU.
    virtual void mlp_up(int layer, const Pass &pass) = 0;
    // MLP: @ down, added to h.
    virtual void mlp_down(int layer, const Pass &pass) = 0;
    // Final RMSNorm and output head for the rows the pass asks outputs of: logits and/or argmax,
    // and the output features (h itself).
    virtual void output_head(const Pass &pass) = 0;
};

}  // namespace specla
