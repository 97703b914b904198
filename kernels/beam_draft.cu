#include <math.h>

#include "beam_draft.cuh"
#include "device_common.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kBeamThreads = 256;
constexpr int kBeamMaxRows = 32;  // width <= sqrt(kBeamMaxCandidates): a row's entries fit a warp

// One CTA. Candidates are ranked by counting, for each, the candidates that come before it
// (width^2 <= kBeamMaxCandidates, so at most a million comparisons spread over the block; at the
// default width 4, 256): no sort, and the order is exactly the host's ranks_before.
__global__ void __launch_bounds__(kBeamThreads) beam_step_kernel(const BeamStepParams p) {
    __shared__ float s_score[kBeamMaxCandidates];
    __shared__ int32_t s_token[kBeamMaxCandidates];
    __shared__ int16_t s_row[kBeamMaxCandidates];
    __shared__ int32_t s_valid[kBeamMaxRows], s_first[kBeamMaxRows + 1];
    __shared__ int32_t s_pick[kBeamMaxRows];
    pdl_wait();
    pdl_trigger();
    const int tid = threadIdx.x, W = p.width;
    const int rows = p.level == 1 ? 1 : *p.count_in;

    // Each row's candidates: its entries up to the first without a token or of probability 0. A
    // warp per row, a lane per entry (W <= 32), so the row is one round of loads.
    const int lane = tid & 31, warp = tid >> 5;
    for (int r = warp; r < rows; r += kBeamThreads / 32) {
        const bool ends = lane >= W || p.ids[r * W + lane] < 0 || p.logp[r * W + lane] == -INFINITY;
        const unsigned mask = __ballot_sync(0xffffffffu, ends);
        if (lane == 0) s_valid[r] = mask ? __ffs(mask) - 1 : 32;
    }
    __syncthreads();
    // Where each row's candidates start: a warp scan over the rows (rows <= W <= 32).
    if (warp == 0) {
        int v = lane < rows ? s_valid[lane] : 0;
#pragma unroll
        for (int o = 1; o < 32; o <<= 1) {
            const int u = __shfl_up_sync(0xffffffffu, v, o);
            if (lane >= o) v += u;
        }
        if (lane == 0) s_first[0] = 0;
        if (lane < rows) s_first[lane + 1] = v;
    }
    if (tid < W) s_pick[tid] = -1;
    __syncthreads();
    const int n = s_first[rows];
    for (int c = tid; c < n; c += blockDim.x) {
        int r = 0;
        while (s_first[r + 1] <= c) ++r;
        const int i = c - s_first[r];
        const float lp = p.logp[r * W + i];
        // TreeBuilder::push_candidate: logp clamped to <= 0, the score added in float.
        const float parent = p.level == 1 ? 0.f : p.scores_in[r];
        s_score[c] = parent + (lp < 0.f ? lp : 0.f);
        s_token[c] = p.ids[r * W + i];
        s_row[c] = int16_t(r);
    }
    __syncthreads();
    for (int c = tid; c < n; c += blockDim.x) {
        const float s = s_score[c];
        int before = 0;
        for (int o = 0; o < n && before < W; ++o) {
            const float so = s_score[o];
            before += (so > s || (so == s && o < c)) ? 1 : 0;
        }
        if (before < W) s_pick[before] = c;
    }
    __syncthreads();

    const int count = n < W ? n : W;
    const int own = (p.level % 2) * W, parents_base = ((p.level - 1) % 2) * W;
    if (tid == 0) *p.count_out = count;
    for (int b = tid; b < W; b += blockDim.x) {
        const int c = s_pick[b];
        const bool ok = b < count && c >= 0;
        const int r = ok ? s_row[c] : -1;
        p.scores_out[b] = ok ? s_score[c] : -INFINITY;
        p.tokens_out[b] = ok ? s_token[c] : -1;
        p.parents_out[b] = p.level == 1 ? -1 : r;
        p.pass_tokens[b] = ok ? s_token[c] : 0;
        // Level 1 and padding rows start from the committed state and its conv cache.
        const int start = ok && p.level > 1 ? parents_base + r : -1;
        p.chain_info[3 * b + 2] = start;
        p.snap_slot[b] = own + b;
        p.window_in[b] = start;
        p.window_out[b] = own + b;
    }
    // The rows' input features: the parent's output feature (level 1: the root's), zero past
    // the frontier.
    const int64_t D = p.D;
    for (int64_t e = tid; e < int64_t(W) * D; e += blockDim.x) {
        const int b = int(e / D);
        const int64_t d = e - int64_t(b) * D;
        const int c = s_pick[b];
        const bool ok = b < count && c >= 0;
        const int r = ok ? (p.level == 1 ? 0 : s_row[c]) : 0;
        p.row_in[int64_t(b) * 2 * D + D + d] = ok ? p.features[int64_t(r) * D + d] : 0.f;
    }
}

}  // namespace

cudaError_t launch_beam_step(const BeamStepParams &p, const LaunchCtx &ctx) {
    if (p.width < 1 || p.width > kBeamMaxRows || int64_t(p.width) * p.width > kBeamMaxCandidates || p.level < 1)
        return cudaErrorInvalidValue;
    return launch_kernel(beam_step_kernel, dim3(1), dim3(kBeamThreads), 0, ctx, p);
}

}  // namespace kern
}  // namespace specla
