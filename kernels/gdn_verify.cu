// Verification and commit kernels (see gdn_verify.cuh).
//
// State-tile kernels use the thread layout of the recurrent kernel (gdn_recurrent.cu, tile shape
// from with_tile_shape): groups of TPC lanes own one value column j of one value head, lane l holds
// S[i][j] for i = e*TPC + l; a CTA of 256 threads covers 256/TPC columns.
#include <algorithm>
#include <mutex>

#include "cp_async.cuh"
#include "device_common.cuh"
#include "gdn_tile.cuh"
#include "gdn_verify.cuh"

namespace specla {
namespace kern {

namespace {

constexpr int kThreads = 256;

// ---- conv + gates over the tree ----------------------------------------------------------------------------
// Same formulas and tap order as the decoding step's in_proj epilogue (inproj_row, gemv_rows.cuh):
// acc = sum_{j < W-1} w[j] * (input W-1-j steps back) + w[W-1] * y, then SiLU.
__global__ void __launch_bounds__(kThreads) verify_conv_kernel(const VerifyConvParams p) {
    pdl_wait();
    pdl_trigger();
    const int64_t t = blockIdx.y;
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    const float *row = p.proj + t * p.R;
    if (c < p.CC) {
        const float y = row[c];
        if (p.pre) p.pre[t * p.CC + c] = y;
        float out;
        if (!p.use_short_conv) {
            out = siluf_(y);
        } else {
            const int W = p.W;
            const float *w = p.conv_w + c * W;
            const int32_t *taps = p.taps + t * (W - 1);
            const int64_t window = int64_t(W - 1) * p.CC;
            const float *cache = p.window_in && p.window_in[t] >= 0 ? p.windows + p.window_in[t] * window : p.conv_cache;
            float acc = 0.f;
            for (int j = 0; j < W - 1; ++j) {
                const int32_t a = taps[W - 2 - j];  // input W-1-j steps back
                const float x = a >= 0 ? p.proj[int64_t(a) * p.R + c] : cache[int64_t(-1 - a) * p.CC + c];
                acc += w[j] * x;
            }
            acc += w[W - 1] * y;
            out = siluf_(acc);
            if (p.window_out) {
                float *next = p.windows + p.window_out[t] * window;
                for (int r = 0; r + 1 < W - 1; ++r) next[int64_t(r) * p.CC + c] = cache[int64_t(r + 1) * p.CC + c];
                next[int64_t(W - 2) * p.CC + c] = y;
            }
        }
        p.act[t * p.CC + c] = out;
    } else if (c < p.CC + p.HV) {
        const int hv = int(c - p.CC);
        p.g[t * p.HV + hv] = gdn_decay_logf_(row[p.row_a + hv], p.A_log[hv], p.dt_bias[hv]);
        p.beta[t * p.HV + hv] = gdn_betaf_(row[p.row_b + hv], p.beta_scale);
    } else if (p.silu_z && c < p.row_a + p.HV) {
        // z column CC + (c - CC - HV): read and written by this thread only.
        float *zc = p.proj + t * p.R + (c - p.HV);
        *zc = siluf_(*zc);
    }
}

// ---- state tiles ---------------------------------------------------------------------------------------------
template <int KPT, int TPC>
__device__ __forceinline__ void tile_load(float (&S)[KPT], const float *state, int K, int V, int hv, int j, bool ok) {
    const int l = threadIdx.x % TPC;
    const float *row = state + (int64_t(hv) * V + (ok ? j : 0)) * K;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        const int i = e * TPC + l;
        S[e] = (ok && i < K) ? row[i] : 0.f;
    }
}

template <int KPT, int TPC>
__device__ __forceinline__ void tile_store(const float (&S)[KPT], float *state, int K, int V, int hv, int j, bool ok) {
    if (!ok) return;
    const int l = threadIdx.x % TPC;
    float *row = state + (int64_t(hv) * V + j) * K;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
        const int i = e * TPC + l;
        if (i < K) row[i] = S[e];
    }
}

// ---- hybrid: the chains of one wave --------------------------------------------------------------------------
// A chain CTA stages node inputs in shared memory (all loads in flight at once, cp.async), so that
// the per-node loop is only the state update: q and k (normalised in place, off the state's
// critical path), the CTA's v columns, exp(g) and beta. q and k are kept lane-major: lane l's KPT
// entries (i = e*TPC + l) as KPT/4 float4 at (e/4)*TPC + l, so a lane reads its slice with KPT/4
// conflict-free 16-byte loads instead of KPT scalar ones. A node takes KS = KPT*TPC floats per
// vector (zero past K). Shared memory: `stage` nodes' inputs, then the chain's node list and
// snapshot slots (max_len each). The same input area stages the pending factors of a deferred
// commit first (chain_apply_pending).
template <int KPT, int TPC>
__host__ __device__ constexpr int64_t chain_stage_floats_per_node() {
    return 2 * int64_t(KPT * TPC) + kThreads / TPC + 2;
}
// Pending factors per batch in the input area of `stage` nodes: a key, the CTA's residual columns,
// the log decay and the node index each.
template <int KPT, int TPC>
__device__ __forceinline__ int chain_pending_batch(int stage) {
    return int(stage * chain_stage_floats_per_node<KPT, TPC>() / (KPT * TPC + kThreads / TPC + 2));
}

// Lane-major position of entry i (= e*TPC + l) in a staged vector.
template <int KPT, int TPC>
__device__ __forceinline__ int stage_index(int i) {
    const int e = i / TPC, l = i - e * TPC;
    return (e >> 2) * (4 * TPC) + l * 4 + (e & 3);
}
template <int KPT, int TPC>
__device__ __forceinline__ void stage_read(const float *v, int l, float (&r)[KPT]) {
    static_assert(KPT % 4 == 0, "lane-major staging moves 4 entries at a time");
    const float4 *v4 = reinterpret_cast<const float4 *>(v) + l;
#pragma unroll
    for (int c = 0; c < KPT / 4; ++c) {
        const float4 a = v4[c * TPC];
        r[4 * c] = a.x, r[4 * c + 1] = a.y, r[4 * c + 2] = a.z, r[4 * c + 3] = a.w;
    }
}
template <int KPT, int TPC>
__device__ __forceinline__ void stage_write(float *v, int l, const float (&r)[KPT]) {
    float4 *v4 = reinterpret_cast<float4 *>(v) + l;
#pragma unroll
    for (int c = 0; c < KPT / 4; ++c) v4[c * TPC] = make_float4(r[4 * c], r[4 * c + 1], r[4 * c + 2], r[4 * c + 3]);
}

// The pending factors of a deferred commit applied to the tile of the chain that starts from the
// committed state: gdn_tile_apply_pending's operations in its order (the same bits), but with the
// factors' inputs staged batch by batch through `area`, every load of a batch in flight at once.
// Here the factors are on the pass's critical path (after the grid-dependency wait), where the
// decoding step applies them under the previous kernel's tail. Called by the whole CTA.
template <int KPT, int TPC>
__device__ void chain_apply_pending(float (&S)[KPT], const PendingFactors &pf, int np, int set, int H, int HV, int K,
                                    int V, int h, int hv, int j0, float *area, int stage) {
    constexpr int CPB = kThreads / TPC, KS = KPT * TPC;
    const int tid = threadIdx.x, grp = tid / TPC, l = tid % TPC;
    const int batch = chain_pending_batch<KPT, TPC>(stage);
    const float *ks = set ? pf.k[1] : pf.k[0];
    const float *gs = set ? pf.g[1] : pf.g[0];
    float *s_key = area, *s_u = s_key + int64_t(batch) * KS, *s_g = s_u + batch * CPB;
    int32_t *s_node = reinterpret_cast<int32_t *>(s_g + batch);
    for (int b0 = 0; b0 < np; b0 += batch) {
        const int nb = min(batch, np - b0);
        __syncthreads();  // the area is free (the previous batch has been applied)
        for (int t = tid; t < nb; t += kThreads) s_node[t] = pf.desc[2 + b0 + t];
        __syncthreads();
        for (int idx = tid; idx < nb * KS; idx += kThreads) {
            const int t = idx / KS, i = idx - t * KS;
            const bool ok = i < K;
            cp_async4(s_key + t * KS + stage_index<KPT, TPC>(i), ks + (int64_t(s_node[t]) * H + h) * K + (ok ? i : 0), ok);
        }
        for (int idx = tid; idx < nb * CPB; idx += kThreads) {
            const int t = idx / CPB, cc = idx - t * CPB;
            const bool ok = j0 + cc < V;
            cp_async4(s_u + idx, pf.u + (int64_t(s_node[t]) * HV + hv) * V + (ok ? j0 + cc : 0), ok);
        }
        for (int t = tid; t < nb; t += kThreads) cp_async4(s_g + t, gs + int64_t(s_node[t]) * HV + hv, true);
        cp_async_wait_all();
        __syncthreads();
        for (int t = 0; t < nb; ++t) {
            float kr[KPT];
            stage_read<KPT, TPC>(s_key + t * KS, l, kr);
            gdn_tile_apply_k<KPT>(S, kr, s_u[t * CPB + grp], expf(s_g[t]));
        }
    }
    __syncthreads();  // the area is free for the nodes' inputs
}

// At most 64 registers (four CTAs per SM) where the tile is 8 entries a lane: measured, not derived.
// Unbounded, the staging's prefetch took the instance to 80 registers; bounded (4 bytes of spill,
// outside the node loop), GDN-1.3B's chain costs ~0.74 instead of ~0.9 us per node and layer
// (bench/journal/2026-12-07-chain-kernel-staging.md). Its 256 CTAs fit one wave either way, so the
// gain is in the generated code, not the occupancy. With 16 entries a lane the bound would spill.
template <int KPT, int TPC>
__global__ void __launch_bounds__(kThreads, KPT <= 8 ? 4 : 1) tree_chain_kernel(const TreeRecurrenceParams p, const int stage) {
    constexpr int CPB = kThreads / TPC, KS = KPT * TPC;
    const int tid = threadIdx.x, grp = tid / TPC, l = tid % TPC;
    const int hv = blockIdx.y, j0 = blockIdx.x * CPB, j = j0 + grp;
    const int K = p.K, V = p.V, H = p.H, HV = p.HV;
    const int group = HV / H, h = hv / group;
    const bool col_ok = j < V;
    const int64_t KD = int64_t(H) * K, VD = int64_t(HV) * V, HVVK = VD * K;
    extern __shared__ float4 chain_sm4[];
    float *s_q = reinterpret_cast<float *>(chain_sm4), *s_k = s_q + int64_t(stage) * KS;
    float *s_v = s_k + int64_t(stage) * KS, *s_decay = s_v + stage * CPB, *s_beta = s_decay + stage;
    int32_t *s_nodes = reinterpret_cast<int32_t *>(s_beta + stage), *s_slots = s_nodes + p.max_len;
    pdl_wait();
    pdl_trigger();
    // The pending factors' count and key set, loaded beside the wave's tables (used by the chain
    // that starts from the committed state).
    const int np = p.pending.desc ? p.pending.desc[0] : 0;
    const int pset = p.pending.desc ? p.pending.desc[1] : 0;
    if (int(blockIdx.z) >= p.wave_info[2 * p.wave + 1]) return;  // a slot beyond this tree's wave
    const int c = p.wave_info[2 * p.wave] + int(blockIdx.z);
    const int first = p.chain_info[3 * c], len = p.chain_info[3 * c + 1], start = p.chain_info[3 * c + 2];
    for (int i = tid; i < len; i += blockDim.x) {
        const int32_t v = p.chain_nodes[first + i];
        s_nodes[i] = v;
        s_slots[i] = p.snap_slot[v];
    }

    float S[KPT];
    tile_load<KPT, TPC>(S, start < 0 ? p.state : p.snaps + int64_t(start) * HVVK, K, V, hv, j, col_ok);
    // The only chain of this launch that starts from the committed state (the host applies the
    // pending factors separately when several do) applies them and writes the tile back.
    if (start < 0 && np > 0) {
        chain_apply_pending<KPT, TPC>(S, p.pending, np, pset, H, HV, K, V, h, hv, j0, s_q, stage);
        tile_store<KPT, TPC>(S, p.state, K, V, hv, j, col_ok);
    } else {
        __syncthreads();  // the node list
    }
    const bool write_k = blockIdx.x == 0 && grp == 0 && hv % group == 0;
    const int64_t col = int64_t(hv) * V + j;  // this group's column in o and u rows
    for (int base = 0; base < len; base += stage) {
        const int m = min(stage, len - base);
        // Stage the inputs of m nodes: none depends on the state, so all loads are in flight at
        // once, and the normalisation of every node runs here, off the state's critical path, with
        // the decoding step's lane layout and reductions (gdn_tile_normalize).
        if (base > 0) __syncthreads();  // the previous stage has been read
        for (int idx = tid; idx < m * KS; idx += kThreads) {
            const int t = idx / KS, i = idx - t * KS;
            const bool ok = i < K;
            const float *row = p.act + int64_t(s_nodes[base + t]) * p.act_ld + int64_t(h) * K + (ok ? i : 0);
            const int d = t * KS + stage_index<KPT, TPC>(i);
            cp_async4(s_q + d, row, ok);
            cp_async4(s_k + d, row + KD, ok);
        }
        for (int idx = tid; idx < m * CPB; idx += kThreads) {
            const int t = idx / CPB, cc = idx - t * CPB;
            const bool ok = j0 + cc < V;
            cp_async4(s_v + idx, p.act + int64_t(s_nodes[base + t]) * p.act_ld + 2 * KD + int64_t(hv) * V + (ok ? j0 + cc : 0),
                      ok);
        }
        for (int t = tid; t < m; t += kThreads) {
            const int64_t node = s_nodes[base + t];
            cp_async4(s_decay + t, p.g + node * HV + hv, true);
            cp_async4(s_beta + t, p.beta + node * HV + hv, true);
        }
        cp_async_wait_all();
        __syncthreads();
        for (int t = tid; t < m; t += kThreads) s_decay[t] = expf(s_decay[t]);
        // One group per node (uniform trip count: the groups of a warp shuffle together).
        for (int t0 = 0; t0 < m; t0 += CPB) {
            const int t = t0 + grp;
            float qr[KPT], kr[KPT];
            if (t < m) {
                stage_read<KPT, TPC>(s_q + t * KS, l, qr);
                stage_read<KPT, TPC>(s_k + t * KS, l, kr);
            } else {
#pragma unroll
                for (int e = 0; e < KPT; ++e) qr[e] = 0.f, kr[e] = 0.f;
            }
            gdn_tile_normalize<KPT, TPC>(qr, kr, p.q_scale);
            if (t < m) {
                stage_write<KPT, TPC>(s_q + t * KS, l, qr);
                stage_write<KPT, TPC>(s_k + t * KS, l, kr);
            }
        }
        __syncthreads();

        // The nodes in order. Node t's inputs are read while node t-1 is updated, and node t-1's
        // output reduction (S^T q) shares its shuffles with node t's S^T k (group_sum2): the
        // output reduction is off the state's critical path, its value and bits unchanged.
        float qn[KPT], kn[KPT];
        stage_read<KPT, TPC>(s_q, l, qn);
        stage_read<KPT, TPC>(s_k, l, kn);
        float vn = s_v[grp], dn = s_decay[0], bn = s_beta[0];
        float ov = 0.f;        // the previous node's share of S^T q, reduced with this node's S^T k
        int64_t o_node = -1;   // that node
        for (int t = 0; t < m; ++t) {
            float qr[KPT], kr[KPT];
#pragma unroll
            for (int e = 0; e < KPT; ++e) qr[e] = qn[e], kr[e] = kn[e];
            const float vj = vn, decay = dn, beta = bn;
            if (t + 1 < m) {
                stage_read<KPT, TPC>(s_q + (t + 1) * KS, l, qn);
                stage_read<KPT, TPC>(s_k + (t + 1) * KS, l, kn);
                vn = s_v[(t + 1) * CPB + grp], dn = s_decay[t + 1], bn = s_beta[t + 1];
            }
            const int64_t node = s_nodes[base + t];
            float kv = gdn_tile_decay_kv<KPT>(S, kr, decay);
            if (t > 0) {
                group_sum2<TPC>(kv, ov);
                if (l == 0 && col_ok) p.o[o_node * VD + col] = ov;
            } else {
                kv = group_sum<TPC>(kv);
            }
            const float u = gdn_residual(beta, vj, kv);
            ov = gdn_tile_add_ku<KPT>(S, qr, kr, u);
            o_node = node;
            if (l == 0 && col_ok) p.u_out[node * VD + col] = u;
            if (write_k) {
#pragma unroll
                for (int e = 0; e < KPT; ++e) {
                    const int i = e * TPC + l;
                    if (i < K) p.k_out[node * KD + int64_t(h) * K + i] = kr[e];
                }
            }
            const int slot = s_slots[base + t];
            if (slot >= 0) tile_store<KPT, TPC>(S, p.snaps + int64_t(slot) * HVVK, K, V, hv, j, col_ok);
        }
        ov = group_sum<TPC>(ov);
        if (l == 0 && col_ok) p.o[o_node * VD + col] = ov;
    }
}

// ---- parallel WY ------------------------------------------------------------------------------------------------
// Per CTA (column tile, value head), from the committed tile S (registers):
//   gam_v = g_v + gam_parent(v);  A[v][u] = beta_v (k_v . k_u) exp(gam_v - gam_u), u in anc(v);
//   C[v][u] = (q_v . k_u) exp(gam_v - gam_u), u in P(v) = anc(v) + {v};
//   R_v = beta_v (v_v - exp(gam_v) S^T k_v);  Vt_v = R_v - sum_{u in anc(v)} A[v][u] Vt_u  (= T R);
//   o_v = exp(gam_v) S^T q_v + sum_{u in P(v)} C[v][u] Vt_u.
// The pair products are computed once per CTA (each CTA needs all of them), the products with S
// of different nodes are independent; only the scalar forward substitution runs in node order.
template <int KPT, int TPC>
__global__ void __launch_bounds__(kThreads) tree_wy_kernel(const TreeRecurrenceParams p) {
    constexpr int CPB = kThreads / TPC;
    extern __shared__ float sm[];
    const int n = p.n;
    float *gam = sm, *qi = gam + n, *ki = qi + n;
    int32_t *par = reinterpret_cast<int32_t *>(ki + n), *poff = par + n;
    float *A = reinterpret_cast<float *>(poff + n + 1), *Cq = A + p.n_pairs, *Vt = Cq + p.n_pairs + n;
    const int tid = threadIdx.x, grp = tid / TPC, l = tid % TPC, lane = tid & 31, warp = tid >> 5;
    const int nw = blockDim.x >> 5;
    const int hv = blockIdx.y, j = blockIdx.x * CPB + grp;
    const int K = p.K, V = p.V, H = p.H, HV = p.HV;
    const int group = HV / H, h = hv / group;
    const bool col_ok = j < V;
    const int64_t KD = int64_t(H) * K, VD = int64_t(HV) * V;
    pdl_wait();
    pdl_trigger();

    float S[KPT];
    tile_load<KPT, TPC>(S, p.state, K, V, hv, j, col_ok);
    if (gdn_tile_apply_pending<KPT, TPC>(S, p.pending, H, HV, K, V, h, hv, j, col_ok) > 0)
        tile_store<KPT, TPC>(S, p.state, K, V, hv, j, col_ok);

    for (int i = tid; i < n; i += blockDim.x) par[i] = p.parents[i], poff[i] = p.pair_off[i];
    if (tid == 0) poff[n] = p.pair_off[n];
    // Normalisation factors of q and k (as l2_normalize: x / sqrt(sum x^2 + 1e-6), q times q_scale).
    for (int v = warp; v < n; v += nw) {
        const float *base = p.act + int64_t(v) * p.act_ld;
        float qs = 0.f, ks = 0.f;
        for (int i = lane; i < K; i += 32) {
            const float q = base[int64_t(h) * K + i], k = base[KD + int64_t(h) * K + i];
            qs += q * q, ks += k * k;
        }
        qs = warp_sum(qs), ks = warp_sum(ks);
        if (lane == 0) qi[v] = p.q_scale / sqrtf(qs + 1e-6f), ki[v] = 1.f / sqrtf(ks + 1e-6f);
    }
    __syncthreads();
    if (tid == 0)
        for (int v = 0; v < n; ++v) gam[v] = p.g[int64_t(v) * HV + hv] + (par[v] >= 0 ? gam[par[v]] : 0.f);
    __syncthreads();
    for (int v = warp; v < n; v += nw) {
        const float *qv = p.act + int64_t(v) * p.act_ld + int64_t(h) * K;
        const float *kv = qv + KD;
        const float beta = p.beta[int64_t(v) * HV + hv];
        int m = 0;
        for (int u = v; u >= 0; u = par[u], ++m) {
            const float *ku = p.act + int64_t(u) * p.act_ld + KD + int64_t(h) * K;
            float dq = 0.f, dk = 0.f;
            for (int i = lane; i < K; i += 32) dq += qv[i] * ku[i], dk += kv[i] * ku[i];
            dq = warp_sum(dq), dk = warp_sum(dk);
            if (lane == 0) {
                const float e = expf(gam[v] - gam[u]);
                Cq[poff[v] + v + m] = dq * qi[v] * ki[u] * e;
                if (m > 0) A[poff[v] + m - 1] = beta * dk * ki[v] * ki[u] * e;
            }
        }
    }
    __syncthreads();

    const bool write_k = blockIdx.x == 0 && grp == 0 && hv % group == 0;
    for (int v = 0; v < n; ++v) {
        const float *base = p.act + int64_t(v) * p.act_ld;
        const float *qp = base + int64_t(h) * K, *kp = base + KD + int64_t(h) * K;
        const float qs = qi[v], ks = ki[v];
        float qr[KPT], kr[KPT];
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int i = e * TPC + l;
            qr[e] = i < K ? qp[i] * qs : 0.f;
            kr[e] = i < K ? kp[i] * ks : 0.f;
        }
        float sk = 0.f, sq = 0.f;
#pragma unroll
        for (int e = 0; e < KPT; ++e) sk = fmaf(S[e], kr[e], sk), sq = fmaf(S[e], qr[e], sq);
        sk = group_sum<TPC>(sk);
        sq = group_sum<TPC>(sq);
        const float vj = col_ok ? base[2 * KD + int64_t(hv) * V + j] : 0.f;
        const float beta = p.beta[int64_t(v) * HV + hv];
        const float eg = expf(gam[v]);
        float r = beta * (vj - eg * sk);
        int m = 1;
        for (int u = par[v]; u >= 0; u = par[u], ++m) r -= A[poff[v] + m - 1] * Vt[u * CPB + grp];
        float o = eg * sq + Cq[poff[v] + v] * r;
        m = 1;
        for (int u = par[v]; u >= 0; u = par[u], ++m) o += Cq[poff[v] + v + m] * Vt[u * CPB + grp];
        if (l == 0) {
            Vt[v * CPB + grp] = r;
            if (col_ok) {
                p.o[int64_t(v) * VD + int64_t(hv) * V + j] = o;
                p.u_out[int64_t(v) * VD + int64_t(hv) * V + j] = r;
            }
        }
        __syncwarp();
        if (write_k) {
#pragma unroll
            for (int e = 0; e < KPT; ++e) {
                const int i = e * TPC + l;
                if (i < K) p.k_out[int64_t(v) * KD + int64_t(h) * K + i] = kr[e];
            }
        }
    }
}

// ---- commit ---------------------------------------------------------------------------------------------------------
template <int KPT, int TPC>
__global__ void __launch_bounds__(kThreads) apply_pending_kernel(const ApplyPendingParams p) {
    constexpr int CPB = kThreads / TPC;
    const int grp = threadIdx.x / TPC;
    const int hv = blockIdx.y, j = blockIdx.x * CPB + grp, layer = blockIdx.z;
    const bool col_ok = j < p.V;
    const int h = hv / (p.HV / p.H);
    pdl_wait();
    pdl_trigger();
    PendingFactors pf = p.pending;
    pf.k[0] += layer * p.k_layer, pf.k[1] += layer * p.k_layer;
    pf.g[0] += layer * p.g_layer, pf.g[1] += layer * p.g_layer;
    pf.u += layer * p.u_layer;
    float *state = p.state + layer * p.state_layer;
    float S[KPT];
    tile_load<KPT, TPC>(S, state, p.K, p.V, hv, j, col_ok);
    if (gdn_tile_apply_pending<KPT, TPC>(S, pf, p.H, p.HV, p.K, p.V, h, hv, j, col_ok) > 0)
        tile_store<KPT, TPC>(S, state, p.K, p.V, hv, j, col_ok);
}

__global__ void __launch_bounds__(kThreads) conv_commit_kernel(const ConvCommitParams p) {
    pdl_wait();
    pdl_trigger();
    const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
    if (c >= p.CC) return;
    const int n = p.desc[0];
    if (n <= 0) return;
    float *cache = p.cache + blockIdx.y * p.cache_layer;
    const float *pre = p.pre + blockIdx.y * p.pre_layer;
    // In place, oldest row first: row r reads old row r + n (> r), not yet overwritten.
    for (int r = 0; r < p.W - 1; ++r) {
        const int src = n - (p.W - 1) + r;
        cache[int64_t(r) * p.CC + c] =
            src >= 0 ? pre[int64_t(p.desc[2 + src]) * p.CC + c] : cache[int64_t(p.W - 1 + src) * p.CC + c];
    }
}

int tile_tpc(int K) {
    int tpc = 0;
    (void)with_tile_shape(K, [&](auto s) {
        tpc = decltype(s)::TPC;
        return cudaSuccess;
    });
    return tpc;
}

}  // namespace

cudaError_t launch_verify_conv(const VerifyConvParams &p, const LaunchCtx &ctx) {
    if (p.n <= 0) return cudaSuccess;
    const dim3 grid(ceil_div((p.silu_z ? p.row_a : p.CC) + p.HV, kThreads), p.n);
    return launch_kernel(verify_conv_kernel, grid, dim3(kThreads), 0, ctx, p);
}

cudaError_t launch_tree_chains(const TreeRecurrenceParams &p, const LaunchCtx &ctx) {
    if (p.chain_slots <= 0) return cudaSuccess;
    return with_tile_shape(p.K, [&](auto s) {
        constexpr int KPT = decltype(s)::KPT, TPC = decltype(s)::TPC;
        constexpr int CPB = kThreads / TPC;
        // Nodes staged at a time: as many as fit beside the node list in the default 48 KiB, at
        // most 32 (23 at GDN-1.3B's K = 256, 32 at K = 128); longer chains take several stages. At
        // least 8 where they fit even for shorter chains: the same area stages the pending factors
        // of a deferred commit, about twice as many a batch.
        const int64_t per_node = chain_stage_floats_per_node<KPT, TPC>() * 4;
        const int64_t room = int64_t(48 << 10) - int64_t(2 * p.max_len) * 4;
        if (room < per_node) return cudaErrorInvalidValue;
        const int64_t want = std::max<int64_t>(p.max_len, 8);
        const int stage = int(std::min<int64_t>(want, std::min<int64_t>(room / per_node, 32)));
        const size_t smem = size_t(stage) * size_t(per_node) + size_t(2 * p.max_len) * 4;
        const dim3 grid(ceil_div(p.V, CPB), p.HV, p.chain_slots);
        return launch_kernel(tree_chain_kernel<KPT, TPC>, grid, dim3(kThreads), smem, ctx, p, stage);
    });
}

size_t tree_wy_smem_bytes(int32_t n, int32_t n_pairs, int32_t K) {
    const int tpc = tile_tpc(K);
    if (!tpc) return 0;
    const size_t bytes = size_t(3 * n + 2 * n + 1 + 2 * n_pairs + n + n * (kThreads / tpc)) * 4;
    return bytes <= size_t(200) << 10 ? bytes : 0;
}

cudaError_t launch_tree_wy(const TreeRecurrenceParams &p, const LaunchCtx &ctx) {
    const size_t smem = tree_wy_smem_bytes(p.n, p.n_pairs, p.K);
    if (!smem) return cudaErrorInvalidValue;
    return with_tile_shape(p.K, [&](auto s) {
        constexpr int KPT = decltype(s)::KPT, TPC = decltype(s)::TPC;
        auto fn = tree_wy_kernel<KPT, TPC>;
        if (smem > 48 * 1024) {
            static std::mutex mu;
            static size_t raised = 48 * 1024;
            std::lock_guard<std::mutex> lock(mu);
            if (smem > raised) {
                const cudaError_t e = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, int(200 << 10));
                if (e != cudaSuccess) return e;
                raised = size_t(200) << 10;
            }
        }
        const dim3 grid(ceil_div(p.V, kThreads / TPC), p.HV);
        return launch_kernel(fn, grid, dim3(kThreads), smem, ctx, p);
    });
}

cudaError_t launch_apply_pending(const ApplyPendingParams &p, const LaunchCtx &ctx) {
    return with_tile_shape(p.K, [&](auto s) {
        constexpr int KPT = decltype(s)::KPT, TPC = decltype(s)::TPC;
        const dim3 grid(ceil_div(p.V, kThreads / TPC), p.HV, p.L);
        return launch_kernel(apply_pending_kernel<KPT, TPC>, grid, dim3(kThreads), 0, ctx, p);
    });
}

cudaError_t launch_conv_commit(const ConvCommitParams &p, const LaunchCtx &ctx) {
    if (p.W <= 1 || p.CC <= 0) return cudaSuccess;
    const dim3 grid(ceil_div(p.CC, kThreads), p.L);
    return launch_kernel(conv_commit_kernel, grid, dim3(kThreads), 0, ctx, p);
}

}  // namespace kern
}  // namespace specla
