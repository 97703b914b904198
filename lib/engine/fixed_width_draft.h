// Fixed-width drafting on the host: the frontier rule, and Backend::draft_fixed_width run as
// passes of the backend's own eval_chain and verify_tree.
//
// The rule is TreeBuilder's fixed-width mode (spec/tree_builder.h, TreeParams::fixed_width),
// written here a second time on purpose: spec/ sits above engine/, and the copy that a backend's
// draft_fixed_width follows must be checked against the builder's, not be the builder's
// (EagleDrafter::replay_levels compares the two on every one-call draft). It is also the CPU
// reference of the device's beam step (kernels/beam_draft.cuh).
#pragma once

#include <stdint.h>

#include <vector>

#include "engine/backend.h"

namespace specla {

// One level's frontier, `width` entries; entries past `count`: score -inf, token -1, parent -1.
struct FixedWidthFrontier {
    int32_t count = 0;
    std::vector<float> scores;     // cumulative scores (float sums of min(0, logp) from the root's 0)
    std::vector<int32_t> tokens;
    std::vector<int32_t> parents;  // the parent's row among the rows the candidates came from
};

// The frontier chosen from top-token rows (`rows` rows of `width` entries, most probable first,
// a row ending at its first id -1 or log-probability -inf): candidates in order (row by row,
// entry by entry), score = parent_scores[row] (0 where null: the root row) + min(0, logp) in
// float, the `width` best kept, the higher score first, the lower candidate index on ties.
void fixed_width_frontier(const int32_t *ids, const float *logp, int32_t rows, int32_t width,
                          const float *parent_scores, FixedWidthFrontier &out);

// Backend::draft_fixed_width through the backend's passes: the catch-up (if any) as eval_chain,
// then per level one verify_tree of the frontier with its ancestors (each row sees its own path on
// the committed state, which does not change), the frontier rows' top tokens and output features
// asked for. Any backend whose passes are row-count invariant gives the trees level-by-level
// drafting gives.
void draft_fixed_width_by_passes(Backend &backend, SequenceState &state, const FixedWidthDraft &draft);

}  // namespace specla
