// One forward pass of the model, as every backend sees it: which tokens, in which topology, on
// top of which state, and what the caller wants back. A plain decoding step is a one-row chain,
// prefill is a chain, verification is a tree; run_layer_program (layer_program.h) turns any of
// them into the same sequence of layer ops.
#pragma once

#include <cstdint>

#include "engine/backend.h"
#include "engine/tree_plan.h"

namespace specla {

enum class PassTopology {
    // Row t follows row t-1 (row 0 follows the committed state): the rows advance the state,
    // which holds the last row's state afterwards (decoding steps, prefill, drafter blocks).
    Chain,
    // Rows form a draft tree (parents[t] < t, -1 = child of the committed state): each row sees
    // only its own ancestors, the committed state is left as it was, and the per-row commit
    // factors are kept so that any root-to-leaf path can be committed without recomputation.
    Tree,
};

struct Pass {
    int32_t n = 0;                  // rows, >= 1
    const int32_t *tokens = nullptr;  // n token ids (host), validated by the caller
    PassTopology topology = PassTopology::Chain;

    // Trees only.
    const int32_t *parents = nullptr;
    TreeAlgorithm algorithm = TreeAlgorithm::Hybrid;  // resolved: never Auto
    const TreePlan *plan = nullptr;                   // the heavy-light plan (Hybrid)

    // Drafter models only: every row's input feature (n x hidden_size, host), which replaces the
    // embedding as the row's start (spec/eagle_drafter.md).
    const float *features_in = nullptr;

    // What the pass gives back: the logits of the rows [logits_from, n) (none when logits_from
    // is n) and, when `argmax`, their argmax (a greedy acceptance needs only that, and a GPU
    // computes it without copying logits); the output features (each row's last hidden state,
    // before the final norm) of the rows [features_from, n). A drafter's level passes want only
    // the newest level's rows.
    int32_t logits_from = 0;
    bool argmax = false;
    int32_t features_from = 0;

    // The commit policy is the same for every pass: a deferred commit's pending factors are
    // applied first, by the same kernels that load each state tile (the backends keep them).
    //
    // Rows belong to one sequence today. A pass over several sequences would add a per-row
    // sequence index here (each sequence's rows contiguous, each chain or tree within its own
    // rows); the layer program does not depend on there being one sequence, only the ops that
    // load state would read it.

    bool is_tree() const { return topology == PassTopology::Tree; }
    int32_t parent(int32_t t) const { return parents ? parents[t] : t - 1; }
    bool wants_logits() const { return logits_from < n; }
    bool wants_features() const { return features_from < n; }
};

}  // namespace specla
