// Verification and commit kernels (see gdn_verify.cuh).
//
// State-tile kernels use the thread layout of the recurrent kernel (gdn_recurrent.cu, tile shape
// from with_tile_shape): groups of TPC lanes own one value column j of one value head, lane l holds
// S[i][j] for i = e*TPC + l; a CTA of 256 threads covers 256/TPC columns.
#include <algorithm>
#include <mutex>

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
// Shared memory of a chain CTA: the chain's node list and snapshot slots, then one stage of node
// inputs as the recurrence reads them (q and k normalised, the CTA's v columns, exp(g), beta).
inline int64_t chain_stage_floats_per_node(int K, int cpb) { return 2 * int64_t(K) + cpb + 2; }

template <int KPT, int TPC>
__global__ void __launch_bounds__(kThreads) tree_chain_kernel(const TreeRecurrenceParams p, const int stage) {
    constexpr int CPB = kThreads / TPC;
    const int tid = threadIdx.x, grp = tid / TPC, l = tid % TPC;
    const int hv = blockIdx.y, j0 = blockIdx.x * CPB, j = j0 + grp;
    const int K = p.K, V = p.V, H = p.H, HV = p.HV;
    const int group = HV / H, h = hv / group;
    const bool col_ok = j < V;
    const int64_t KD = int64_t(H) * K, VD = int64_t(HV) * V, HVVK = VD * K;
    extern __shared__ float chain_sm[];
    int32_t *s_nodes = reinterpret_cast<int32_t *>(chain_sm), *s_slots = s_nodes + p.max_len;
    float *s_q = chain_sm + 2 * p.max_len, *s_k = s_q + int64_t(stage) * K, *s_v = s_k + int64_t(stage) * K;
    float *s_decay = s_v + stage * CPB, *s_beta = s_decay + stage;
    pdl_wait();
    pdl_trigger();
    if (int(blockIdx.z) >= p.wave_info[2 * p.wave + 1]) return;  // a slot beyond this tree's wave
    const int c = p.wave_info[2 * p.wave] + int(blockIdx.z);
    const int first = p.chain_info[3 * c], len = p.chain_info[3 * c + 1], start = p.chain_info[3 * c + 2];
    for (int i = tid; i < len; i += blockDim.x) {
        const int32_t v = p.chain_nodes[first + i];
        s_nodes[i] = v;
        s_slots[i] = p.snap_slot[v];
    }
    __syncthreads();

    float S[KPT];
    tile_load<KPT, TPC>(S, start < 0 ? p.state : p.snaps + int64_t(start) * HVVK, K, V, hv, j, col_ok);
    if (start < 0) {
        // The only chain of this launch that starts from the committed state (the host applies
        // the pending factors separately when several do): apply them and write the tile back.
        if (gdn_tile_apply_pending<KPT, TPC>(S, p.pending, H, HV, K, V, h, hv, j, col_ok) > 0)
            tile_store<KPT, TPC>(S, p.state, K, V, hv, j, col_ok);
    }
    const bool write_k = blockIdx.x == 0 && grp == 0 && hv % group == 0;
    for (int base = 0; base < len; base += stage) {
        const int m = min(stage, len - base);
        // Stage the inputs of m nodes: none depends on the state, so all loads are in flight at
        // once and the normalisation of every node runs here, off the state's critical path, with
        // the decoding step's lane layout and reductions (gdn_tile_normalize): the per-node loop
        // below is then only the state update, bitwise the decoding step's.
        if (base > 0) __syncthreads();  // the previous stage has been read
        for (int idx = tid; idx < m * K; idx += blockDim.x) {
            const int t = idx / K, i = idx - t * K;
            const float *row = p.act + int64_t(s_nodes[base + t]) * p.act_ld + int64_t(h) * K;
            s_q[idx] = row[i];
            s_k[idx] = row[KD + i];
        }
        for (int idx = tid; idx < m * CPB; idx += blockDim.x) {
            const int t = idx / CPB, cc = idx - t * CPB;
            const int64_t node = s_nodes[base + t];
            s_v[idx] = j0 + cc < V ? p.act[node * p.act_ld + 2 * KD + int64_t(hv) * V + j0 + cc] : 0.f;
        }
        for (int t = tid; t < m; t += blockDim.x) {
            const int64_t node = s_nodes[base + t];
            s_decay[t] = expf(p.g[node * HV + hv]);
            s_beta[t] = p.beta[node * HV + hv];
        }
        __syncthreads();
        // One group per node (uniform trip count: the groups of a warp shuffle together).
        for (int t0 = 0; t0 < m; t0 += CPB) {
            const int t = t0 + grp;
            float qr[KPT], kr[KPT];
#pragma unroll
            for (int e = 0; e < KPT; ++e) {
                const int i = e * TPC + l;
                qr[e] = t < m && i < K ? s_q[int64_t(t) * K + i] : 0.f;
                kr[e] = t < m && i < K ? s_k[int64_t(t) * K + i] : 0.f;
            }
            gdn_tile_normalize<KPT, TPC>(qr, kr, p.q_scale);
#pragma unroll
            for (int e = 0; e < KPT; ++e) {
                const int i = e * TPC + l;
                if (t < m && i < K) s_q[int64_t(t) * K + i] = qr[e], s_k[int64_t(t) * K + i] = kr[e];
            }
        }
        __syncthreads();

        for (int t = 0; t < m; ++t) {
            const int64_t node = s_nodes[base + t];
            float qr[KPT], kr[KPT];
#pragma unroll
            for (int e = 0; e < KPT; ++e) {
                const int i = e * TPC + l;
                qr[e] = i < K ? s_q[int64_t(t) * K + i] : 0.f;
                kr[e] = i < K ? s_k[int64_t(t) * K + i] : 0.f;
            }
            float u;
            const float ov = gdn_tile_update<KPT, TPC>(S, qr, kr, s_v[t * CPB + grp], s_decay[t], s_beta[t], &u);
            if (l == 0 && col_ok) {
                p.o[node * VD + int64_t(hv) * V + j] = ov;
                p.u_out[node * VD + int64_t(hv) * V + j] = u;
            }
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
        // most 32 (23 at GDN-1.3B's K = 256, 32 at K = 128); longer chains take several stages.
        const int64_t per_node = chain_stage_floats_per_node(p.K, CPB) * 4;
        const int64_t room = int64_t(48 << 10) - int64_t(2 * p.max_len) * 4;
        if (room < per_node) return cudaErrorInvalidValue;
        const int stage = int(std::min<int64_t>(std::max(p.max_len, 1), std::min<int64_t>(room / per_node, 32)));
        const size_t smem = size_t(2 * p.max_len) * 4 + size_t(stage) * size_t(per_node);
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
