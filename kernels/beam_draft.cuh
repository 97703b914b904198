// Fixed-width drafting on the device: between two drafter level passes, one CTA picks the next
// level's frontier and writes the next pass's inputs, so that every level of a draft runs inside
// one captured graph with no host round trip (lib/backend/cuda/cuda_draft.cpp).
//
// The rule is TreeBuilder's fixed-width mode (spec/tree_builder.h, TreeParams::fixed_width), the
// host reference: the children of the previous frontier's rows are the level's candidates, in
// order (row by row, each row's entries most probable first, a row ending at its first id -1 or
// log-probability -inf); a candidate's score is its parent's plus min(0, logp) in float; the
// frontier is the `width` best candidates, the higher score first, the lower candidate index on
// ties. Frontier node b of level l (depth l) owns state slot (l % 2) * width + b: its pass starts
// from its parent's slot (level 1: the committed state) and leaves its own state there, so a level
// never reads a slot it writes.
#pragma once

#include <stdint.h>

#include "launch_common.cuh"

namespace specla {
namespace kern {

// Largest width * width (candidates per level) the kernel holds in shared memory.
constexpr int32_t kBeamMaxCandidates = 1024;

struct BeamStepParams {
    int32_t width = 0;  // W: frontier nodes per level and entries per top-token row
    int32_t level = 0;  // the frontier this launch selects (depth `level`), >= 1
    // The rows the candidates come from, W entries each: level 1, the one root row; else the W
    // rows of the previous level's pass, of which the first *count_in are its frontier.
    const int32_t *ids = nullptr;
    const float *logp = nullptr;
    const float *scores_in = nullptr;  // [W] the previous frontier's scores (level > 1)
    const int32_t *count_in = nullptr;  // the previous frontier's size (level > 1)
    // The previous rows' output features, [rows][D] (level 1: the root feature, one row).
    const float *features = nullptr;
    int64_t D = 0;

    // The level's frontier: its size, scores, tokens and parent rows (-1: the root), W entries
    // each, entries past the size: score -inf, token -1, parent -1.
    int32_t *count_out = nullptr;
    float *scores_out = nullptr;
    int32_t *tokens_out = nullptr;
    int32_t *parents_out = nullptr;

    // The next pass's inputs, W rows (rows past the frontier: token 0 and a zero feature from the
    // committed state, computed and ignored).
    int32_t *pass_tokens = nullptr;    // [W]
    float *row_in = nullptr;           // [W][2D]: the feature goes into the second half
    int32_t *chain_info = nullptr;     // [3W] (first, length, start) per chain: start written here
    int32_t *snap_slot = nullptr;      // [W] the slot receiving each row's state
    int32_t *window_in = nullptr;      // [W] the conv window each row reads (-1: the committed cache)
    int32_t *window_out = nullptr;     // [W] the window slot each row leaves its own window in
};

cudaError_t launch_beam_step(const BeamStepParams &p, const LaunchCtx &ctx);

}  // namespace kern
}  // namespace specla
