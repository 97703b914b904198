// Recurrence of one value head over a draft tree on the CPU, by the two exact schedules of
// lib/engine/tree_recurrence.md (sections 2 and 3). Both read the committed state S and never
// write it; both produce, for every node, the head output o (after the node's own path) and the
// delta residual u (the commit factor).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/tree_plan.h"

namespace specla {
namespace cpu {

// Per-node inputs of one value head.
struct HeadInputs {
    int32_t n, K, V;
    const int32_t *parents;
    const float *q, *k, *v;  // node i's vector at base + i * stride
    int64_t q_stride, k_stride, v_stride;
    const float *beta, *g;   // node i's value at base + i * gate_stride
    int64_t gate_stride;
};

struct HeadOutputs {
    float *o;  // node i at o + i * o_stride
    int64_t o_stride;
    float *u;  // node i at u + i * u_stride
    int64_t u_stride;
};

// Hybrid: chains state-resident, branch-point states copied into `scratch`
// ((plan.n_snapshots + 1) * K * V floats).
void tree_recurrence_hybrid(const TreePlan &plan, const float *S, const HeadInputs &in, const HeadOutputs &out,
                            float *scratch);

// Parallel tree-masked WY form: T = (I + A)^-1 with A masked to ancestors, Vt = U - W S,
// o_v = exp(gam_v) S^T q_v + sum_{u in path(v)} (q_v . k_u) exp(gam_v - gam_u) Vt_u.
// scratch: wy_scratch_floats(n, K, V) floats.
size_t wy_scratch_floats(int32_t n, int32_t K, int32_t V);
void tree_recurrence_wy(const float *S, const HeadInputs &in, const HeadOutputs &out, float *scratch);

}  // namespace cpu
}  // namespace specla
