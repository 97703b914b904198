// The CUDA backend's layer ops (forward/layer_ops.h): the model's layer program enqueues its
// kernels through them on the sequence's stream. Launch order and buffers only; the arithmetic is
// in kernels/. One op set serves three launch forms of a pass (CudaPassForm, cuda_backend.h):
//
// * Step: one row of a target model (a plain decoding step). Each projection is the one-row GEMV
//   with its prologue (RMSNorm, gated head norm) and epilogue (conv + gates, residual add, SwiGLU,
//   logits + argmax) fused; the recurrence is the one-token step kernel. Kernels are chained with
//   programmatic dependent launch so each one's weight stream starts under the previous one's tail.
// * Block: a chain of rows (prefill, a drafter's rows). Projections are cuBLAS bf16 GEMMs (fp32
//   accumulate, activations rounded to bf16) with separate norm kernels; the recurrence is the chunk
//   (WY) form on tensor cores for long blocks of supported head shapes, else the state-resident
//   recurrent kernel.
// * Tree: a verification pass. Projections are multi-row GEMVs that reduce each row in exactly the
//   one-row GEMV's order (fp32 activations, weights read once per pass), conv windows follow each
//   node's path, and the recurrence runs as heavy-light chains (bitwise equal to decoding each root
//   path) or in the tree-masked WY form; per-node factors are kept for the commit.
//
// Every form applies a deferred commit's pending factors inside the kernels that load the state.
// Nothing here allocates or synchronises with the host, so Step and Tree passes can be captured
// into graphs (CudaBackend::launch_pass).
#include <algorithm>
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "forward/layer_program.h"
#include "conv.cuh"
#include "embedding.cuh"
#include "gdn_chunk.cuh"
#include "gdn_recurrent.cuh"
#include "gdn_verify.cuh"
#include "gemv.cuh"
#include "gemv_multi.cuh"
#include "norms.cuh"
#include "swiglu.cuh"
#include "top_tokens.cuh"

namespace specla {
namespace cuda {

namespace {

float beta_scale(const ModelConfig &c) { return c.allow_neg_eigval ? 2.f : 1.f; }

// Y[n][rows] (fp32, row-major) = X[n][cols] (bf16) * W[rows][cols]^T + beta * Y.
void gemm_bf16(cublasHandle_t h, const uint16_t *w, int64_t rows, int64_t cols, const uint16_t *x, int32_t n, float *y,
               float beta) {
    const float alpha = 1.f;
    check(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), n, int(cols), &alpha, w, CUDA_R_16BF, int(cols), x,
                       CUDA_R_16BF, int(cols), &beta, y, CUDA_R_32F, int(rows), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
}

// Row-major batched products on fp32 data with TF32 tensor cores, written in cuBLAS's
// column-major terms. Each batch entry b uses A + b*sA etc.
void gemm_tf32_batched(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const float *A, int lda, long long sA, const float *B, int ldb, long long sB, float *Cm,
                       int ldc, long long sC, int batch) {
    const float alpha = 1.f, beta = 0.f;
    check(cublasGemmStridedBatchedEx(h, ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sA, B, CUDA_R_32F, ldb, sB,
                                     &beta, Cm, CUDA_R_32F, ldc, sC, batch, CUBLAS_COMPUTE_32F_FAST_TF32,
                                     CUBLAS_GEMM_DEFAULT),
          "cublasGemmStridedBatchedEx");
}

}  // namespace

class CudaPassOps final : public LayerOps {
public:
    CudaPassOps(CudaBackend &b, CudaSequenceState &st, const CudaPassPlan &plan)
        : b_(b), c_(b.config_), w_(*b.weights_), st_(st), plan_(plan), lay_(b.config_), ctx_(b.launch_ctx(st.stream)) {
        ctx_.pdl = plan.pdl;
    }

    void input_rows(const Pass &pass) override;
    void mixer_in(int layer, const Pass &pass) override;
    void conv_gates(int layer, const Pass &pass) override;
    void recurrence(int layer, const Pass &pass) override;
    void mixer_out(int layer, const Pass &pass) override;
    void mlp_up(int layer, const Pass &pass) override;
    void mlp_down(int layer, const Pass &pass) override;
    void output_head(const Pass &pass) override;

private:
    bool step() const { return plan_.form == CudaPassForm::Step; }
    bool tree() const { return plan_.form == CudaPassForm::Tree; }
    float *conv_cache(int layer) const {
        return st_.conv ? st_.conv + size_t(layer) * size_t(c_.conv_cache_floats_per_layer()) : nullptr;
    }
    float *state(int layer) const { return st_.recurrent + size_t(layer) * size_t(c_.recurrent_state_floats_per_layer()); }
    // The Tree form's rows of one layer in the factor buffers (cuda_backend.h).
    size_t factor_row0(int layer) const { return size_t(layer) * size_t(st_.factor_rows); }
    // One projection over the pass's rows in the form's kernel: the one-row GEMV (Step) or the
    // multi-row GEMV (Tree), whose rows are `ld`-strided; Block forms call cuBLAS themselves.
    void gemv(kern::GemvParams g, int32_t n, int64_t x_ld, int64_t out_ld, int64_t z_ld, const char *what);
    unsigned long long *trace_slot() {
#ifdef SPECLA_KERNEL_TRACE
        // The decoding step's timeline (bench_decode --trace): in_proj, recurrent, o_proj, gate_up,
        // down per layer, then lm_head.
        if (step() && b_.options_.decode_trace) return b_.options_.decode_trace + kern::kOpTraceSlots * trace_index_++;
#endif
        return nullptr;
    }

    CudaBackend &b_;
    const ModelConfig &c_;
    const DeviceWeights &w_;
    CudaSequenceState &st_;
    const CudaPassPlan &plan_;
    const InProjLayout lay_;
    kern::LaunchCtx ctx_;
#ifdef SPECLA_KERNEL_TRACE
    int trace_index_ = 0;
#endif
};

void CudaPassOps::gemv(kern::GemvParams g, int32_t n, int64_t x_ld, int64_t out_ld, int64_t z_ld, const char *what) {
    if (step()) {
#ifdef SPECLA_KERNEL_TRACE
        g.trace = trace_slot();
#endif
        check(kern::launch_gemv(g, ctx_), what);
        return;
    }
    kern::GemvMultiParams m;
    m.g = g;
    m.n = n, m.x_ld = x_ld, m.out_ld = out_ld, m.z_ld = z_ld;
    check(kern::launch_gemv_multi(m, ctx_), what);
}

void CudaPassOps::input_rows(const Pass &pass) {
    const int32_t n = pass.n;
    const int64_t D = c_.hidden_size;
    // The tokens (and a tree's tables) come from pinned mirrors the host filled before the pass,
    // so a captured pass reads each call's values; a drafting level's are on the device already.
    const bool staged = plan_.draft != nullptr;
    if (!staged)
        check(cudaMemcpyAsync(st_.d_tokens, st_.h_tokens, size_t(n) * 4, cudaMemcpyHostToDevice, st_.stream),
              "copy tokens");
    if (tree() && !staged) {
        check(cudaMemcpyAsync(st_.tree_tables, st_.h_tree_tables, st_.tree_tables_count * 4, cudaMemcpyHostToDevice,
                              st_.stream),
              "copy tree tables");
        check(cudaMemsetAsync(st_.verify_argmax, 0, size_t(n) * 8, st_.stream), "reset argmax");
    }
    // The first kernel follows a copy, not a kernel: no PDL edge. It also resets the argmax slot
    // of the one-row output head (Step, Block).
    kern::LaunchCtx first = ctx_;
    first.pdl = false;
    unsigned long long *argmax_reset = tree() ? nullptr : st_.d_argmax;
    if (!b_.is_drafter()) {
        check(kern::launch_embedding(w_.embeddings, st_.d_tokens, n, D, st_.h, D, argmax_reset, first), "embedding");
        return;
    }
    // Row t of row_in: [embedding[token_t] | feature_t] (the order the training tool concatenates
    // in), then x0 = fc @ row into the residual rows. The features come from the pinned copy
    // stage_features() made.
    if (!staged)
        check(cudaMemcpy2DAsync(st_.row_in + D, size_t(2 * D) * 4, st_.h_features, size_t(D) * 4, size_t(D) * 4,
                                size_t(n), cudaMemcpyHostToDevice, st_.stream),
              "cudaMemcpy2DAsync(input features)");
    check(kern::launch_embedding(w_.embeddings, st_.d_tokens, n, D, st_.row_in, 2 * D, argmax_reset, first),
          "embedding (drafter)");
    // The multi-row GEMV for any n (one row included): fp32 inputs, each row reduced in the
    // one-token GEMV's order, so a row's x0 is the same in a block and in a verification pass.
    kern::GemvMultiParams fc;
    fc.g.w = w_.fc, fc.g.rows = D, fc.g.cols = 2 * D;
    fc.g.pro = kern::GemvPrologue::None, fc.g.x = st_.row_in;
    fc.g.epi = kern::GemvEpilogue::Store, fc.g.out = st_.h;
    fc.n = n, fc.x_ld = 2 * D, fc.out_ld = D;
    check(kern::launch_gemv_multi(fc, ctx_), "fc (drafter input rows)");
}

void CudaPassOps::mixer_in(int layer, const Pass &pass) {
    const DeviceLayer &w = w_.layers[size_t(layer)];
    const int64_t D = c_.hidden_size;
    if (plan_.form == CudaPassForm::Block) {
        check(kern::launch_rmsnorm_rows(st_.h, D, w.attn_norm, pass.n, D, c_.norm_eps, st_.xb, ctx_), "attn norm");
        gemm_bf16(st_.cublas, w.in_proj, lay_.rows, D, st_.xb, pass.n, st_.proj, 0.f);
        return;
    }
    kern::GemvParams in;
    in.w = w.in_proj, in.rows = lay_.rows, in.cols = D;
    in.pro = kern::GemvPrologue::RmsNorm, in.x = st_.h, in.norm_w = w.attn_norm, in.eps = c_.norm_eps;
    in.out = st_.proj;
    if (step()) {
        // The one-row GEMV's epilogue does conv_gates() too: conv over the cache (which it moves
        // on), SiLU, the decay and beta gates, and the gate's SiLU that o_proj's head norm takes.
        in.epi = kern::GemvEpilogue::InProj;
        in.conv_cache = conv_cache(layer);
        in.conv_w = w.conv, in.conv_size = c_.conv_size, in.conv_channels = c_.conv_channels();
        in.use_short_conv = c_.use_short_conv;
        in.row_a = lay_.a, in.row_b = lay_.b, in.A_log = w.A_log, in.dt_bias = w.dt_bias;
        in.beta_scale = beta_scale(c_);
        in.silu_z = c_.use_gate;
    } else {
        in.epi = kern::GemvEpilogue::Store;
    }
    gemv(in, pass.n, D, lay_.rows, 0, "in_proj");
}

void CudaPassOps::conv_gates(int layer, const Pass &pass) {
    if (step()) return;  // fused into mixer_in's epilogue
    const DeviceLayer &w = w_.layers[size_t(layer)];
    const int64_t R = lay_.rows, CC = c_.conv_channels();
    const int32_t n = pass.n;
    if (tree()) {
        const TreeTableLayout tab(st_.factor_rows, c_.conv_size);
        const size_t lf = factor_row0(layer);
        kern::VerifyConvParams cp;
        cp.n = n, cp.proj = st_.proj, cp.R = R, cp.CC = CC, cp.row_a = lay_.a, cp.row_b = lay_.b;
        cp.taps = st_.tree_tables + tab.taps;
        cp.conv_cache = conv_cache(layer);
        cp.conv_w = w.conv, cp.W = c_.conv_size, cp.use_short_conv = c_.use_short_conv ? 1 : 0;
        cp.HV = c_.num_v_heads, cp.A_log = w.A_log, cp.dt_bias = w.dt_bias;
        cp.beta_scale = beta_scale(c_);
        cp.act = st_.verify_act, cp.g = st_.factor_log_decays[plan_.set] + lf * size_t(c_.num_v_heads);
        cp.beta = st_.verify_beta;
        cp.pre = st_.factor_preconv ? st_.factor_preconv + lf * size_t(CC) : nullptr;
        cp.silu_z = c_.use_gate ? 1 : 0;  // o_proj's head norm takes the gate as is (mixer_out)
        if (plan_.draft) {
            cp.window_in = plan_.draft->window_in, cp.window_out = plan_.draft->window_out;
            cp.windows = plan_.draft->windows;
        }
        check(kern::launch_verify_conv(cp, ctx_), "conv + gates (verify)");
        return;
    }
    const int H = c_.num_heads, HV = c_.num_v_heads, K = c_.head_k_dim, V = c_.head_v_dim;
    kern::ConvPrefillParams cp;
    cp.n = n, cp.n_padded = plan_.padded_rows;
    cp.proj = st_.proj, cp.proj_ld = R;
    cp.conv_cache = conv_cache(layer), cp.conv_w = w.conv, cp.W = c_.conv_size, cp.use_short_conv = c_.use_short_conv;
    cp.H = H, cp.HV = HV, cp.K = K, cp.V = V;
    cp.row_a = lay_.a, cp.row_b = lay_.b, cp.A_log = w.A_log, cp.dt_bias = w.dt_bias;
    cp.beta_scale = beta_scale(c_), cp.q_scale = 1.f / std::sqrt(float(K));
    cp.q = st_.q, cp.k = st_.k, cp.v = st_.v, cp.g = st_.gl, cp.beta = st_.beta;
    check(kern::launch_conv_prefill(cp, ctx_), "conv + gates");
    if (c_.use_short_conv)
        check(kern::launch_conv_cache_update(conv_cache(layer), st_.proj, R, n, c_.conv_size, CC, ctx_), "conv cache update");
}

void CudaPassOps::recurrence(int layer, const Pass &pass) {
    const int H = c_.num_heads, HV = c_.num_v_heads, K = c_.head_k_dim, V = c_.head_v_dim;
    const int32_t n = pass.n;
    if (tree()) {
        b_.enqueue_tree_layer(st_, layer, *plan_.tree, plan_.set, ctx_);
        return;
    }
    if (step()) {
        const int64_t VD = c_.value_dim();
        kern::RecurrentParams rp;
        rp.n_tokens = 1, rp.H = H, rp.HV = HV, rp.K = K, rp.V = V;
        rp.q = st_.proj + lay_.q, rp.k = st_.proj + lay_.k, rp.v = st_.proj + lay_.v;
        rp.g = st_.proj + lay_.a, rp.beta = st_.proj + lay_.b;
        rp.q_tstride = lay_.rows, rp.q_hstride = K;
        rp.v_tstride = lay_.rows, rp.v_hstride = V;
        rp.gb_tstride = lay_.rows, rp.gb_hstride = 1;
        rp.state = state(layer);
        rp.o = st_.o, rp.o_tstride = VD, rp.o_hstride = V;
        rp.normalize = 1, rp.q_scale = 1.f / std::sqrt(float(K));
        rp.pending = b_.pending_of(st_, layer);  // deferred commit: applied when the device count is > 0
        rp.l2_keep_state = b_.keep_state_in_l2_;
#ifdef SPECLA_KERNEL_TRACE
        rp.trace = trace_slot();
#endif
        check(kern::launch_gdn_recurrent(rp, ctx_), "recurrent step");
        return;
    }
    const int32_t Tp = plan_.padded_rows;
    if (plan_.chunk) {
        const int32_t C = kern::kChunk;
        const int nc = Tp / C;
        // G = K K^T and QK = Q K^T per key head and chunk: row-major [C][C] outputs.
        gemm_tf32_batched(st_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, C, C, K, st_.k, K, (long long)C * K, st_.k, K,
                          (long long)C * K, st_.G, C, (long long)C * C, H * nc);
        gemm_tf32_batched(st_.cublas, CUBLAS_OP_T, CUBLAS_OP_N, C, C, K, st_.k, K, (long long)C * K, st_.q, K,
                          (long long)C * K, st_.QK, C, (long long)C * C, H * nc);
        kern::ChunkPrepParams pp;
        pp.n_chunks = nc, pp.H = H, pp.HV = HV;
        pp.G = st_.G, pp.QK = st_.QK, pp.g = st_.gl, pp.beta = st_.beta;
        pp.gam = st_.gam, pp.Pm = st_.Pm, pp.Tb = st_.Tb, pp.Tu = st_.Tu;
        check(kern::launch_chunk_prep(pp, ctx_), "chunk prep");
        // W = Tb K (per value head, its key head's K), U = Tu V.
        const int group = HV / H;
        if (group == 1) {
            gemm_tf32_batched(st_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, K, C, C, st_.k, K, (long long)C * K, st_.Tb, C,
                              (long long)C * C, st_.W, K, (long long)C * K, HV * nc);
        } else {
            for (int hv = 0; hv < HV; ++hv)
                gemm_tf32_batched(st_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, K, C, C, st_.k + size_t(hv / group) * Tp * K, K,
                                  (long long)C * K, st_.Tb + size_t(hv) * nc * C * C, C, (long long)C * C,
                                  st_.W + size_t(hv) * Tp * K, K, (long long)C * K, nc);
        }
        gemm_tf32_batched(st_.cublas, CUBLAS_OP_N, CUBLAS_OP_N, V, C, C, st_.v, V, (long long)C * V, st_.Tu, C,
                          (long long)C * C, st_.U, V, (long long)C * V, HV * nc);
        kern::ChunkPassParams sp;
        sp.n_chunks = nc, sp.H = H, sp.HV = HV, sp.K = K, sp.V = V;
        sp.q = st_.q, sp.k = st_.k, sp.W = st_.W, sp.U = st_.U, sp.Pm = st_.Pm, sp.gam = st_.gam;
        sp.state = state(layer), sp.o = st_.o;
        check(kern::launch_chunk_state_pass(sp, ctx_), "chunk state pass");
        return;
    }
    kern::RecurrentParams rp;
    rp.n_tokens = n, rp.H = H, rp.HV = HV, rp.K = K, rp.V = V;
    rp.q = st_.q, rp.k = st_.k, rp.v = st_.v, rp.g = st_.gl, rp.beta = st_.beta;
    rp.q_tstride = K, rp.q_hstride = int64_t(Tp) * K;
    rp.v_tstride = V, rp.v_hstride = int64_t(Tp) * V;
    rp.gb_tstride = 1, rp.gb_hstride = Tp;
    rp.state = state(layer);
    rp.o = st_.o, rp.o_tstride = V, rp.o_hstride = int64_t(Tp) * V;
    rp.normalize = 0;
    rp.pending = b_.pending_of(st_, layer);
    check(kern::launch_gdn_recurrent(rp, ctx_), "recurrent block");
}

void CudaPassOps::mixer_out(int layer, const Pass &pass) {
    const DeviceLayer &w = w_.layers[size_t(layer)];
    const int64_t D = c_.hidden_size, VD = c_.value_dim(), R = lay_.rows;
    const int V = c_.head_v_dim;
    if (plan_.form == CudaPassForm::Block) {
        check(kern::launch_gated_norm_rows(st_.o, V, int64_t(plan_.padded_rows) * V, c_.use_gate ? st_.proj + lay_.g : nullptr,
                                           R, w.o_norm, pass.n, c_.num_v_heads, V, c_.norm_eps, st_.xb, ctx_),
              "gated norm");
        gemm_bf16(st_.cublas, w.o_proj, D, VD, st_.xb, pass.n, st_.h, 1.f);
        return;
    }
    kern::GemvParams op;
    op.w = w.o_proj, op.rows = D, op.cols = VD;
    op.pro = kern::GemvPrologue::HeadNorm, op.x = st_.o, op.norm_w = w.o_norm, op.eps = c_.norm_eps;
    // The gate went through SiLU once per row before (use_gate 2): in mixer_in's epilogue (Step)
    // or in conv_gates' kernel (Tree).
    op.z = c_.use_gate ? st_.proj + lay_.g : nullptr, op.head_dim = V;
    op.use_gate = c_.use_gate ? 2 : 0;
    op.epi = kern::GemvEpilogue::Add, op.out = st_.h;
    gemv(op, pass.n, VD, D, R, "o_proj");
}

void CudaPassOps::mlp_up(int layer, const Pass &pass) {
    const DeviceLayer &w = w_.layers[size_t(layer)];
    const int64_t D = c_.hidden_size, I = c_.intermediate_size;
    if (plan_.form == CudaPassForm::Block) {
        check(kern::launch_rmsnorm_rows(st_.h, D, w.mlp_norm, pass.n, D, c_.norm_eps, st_.xb, ctx_), "mlp norm");
        gemm_bf16(st_.cublas, w.gate_up, 2 * I, D, st_.xb, pass.n, st_.gu, 0.f);
        check(kern::launch_swiglu_rows(st_.gu, pass.n, I, st_.xb, ctx_), "swiglu");
        return;
    }
    kern::GemvParams gu;
    gu.w = w.gate_up, gu.rows = 2 * I, gu.cols = D;
    gu.pro = kern::GemvPrologue::RmsNorm, gu.x = st_.h, gu.norm_w = w.mlp_norm, gu.eps = c_.norm_eps;
    gu.epi = kern::GemvEpilogue::SwiGLU, gu.out = st_.gu;
    gemv(gu, pass.n, D, I, 0, "gate_up");
}

void CudaPassOps::mlp_down(int layer, const Pass &pass) {
    const DeviceLayer &w = w_.layers[size_t(layer)];
    const int64_t D = c_.hidden_size, I = c_.intermediate_size;
    if (plan_.form == CudaPassForm::Block) {
        gemm_bf16(st_.cublas, w.down, D, I, st_.xb, pass.n, st_.h, 1.f);
        return;
    }
    kern::GemvParams dn;
    dn.w = w.down, dn.rows = D, dn.cols = I;
    dn.pro = kern::GemvPrologue::None, dn.x = st_.gu;
    dn.epi = kern::GemvEpilogue::Add, dn.out = st_.h;
    gemv(dn, pass.n, I, D, 0, "down");
}

void CudaPassOps::output_head(const Pass &pass) {
    const int64_t D = c_.hidden_size, vocab = c_.vocab_size;
    const int32_t n = pass.n;
    kern::GemvParams lm;
    lm.w = w_.lm_head, lm.rows = vocab, lm.cols = D;
    lm.pro = kern::GemvPrologue::RmsNorm, lm.norm_w = w_.final_norm, lm.eps = c_.norm_eps;
    lm.epi = kern::GemvEpilogue::Logits, lm.out = st_.logits;
    if (step()) {
        lm.x = st_.h, lm.argmax = st_.d_argmax;
        lm.clear_after_wait = st_.desc;  // every layer has applied the pending factors by then
        gemv(lm, 1, D, vocab, 0, "lm_head");
        check(cudaMemcpyAsync(st_.h_argmax, st_.d_argmax, 8, cudaMemcpyDeviceToHost, st_.stream), "copy argmax");
        return;
    }
    if (tree()) {
        // Every node's logits stay on the device (the host copies the rows it wants after the
        // pass); their argmax keys go to the pinned mirror.
        lm.x = st_.h, lm.argmax = st_.verify_argmax;
        gemv(lm, n, D, vocab, 0, "lm_head (verify)");
        // The pending factors (if any) have been applied by every layer: clear the count.
        check(cudaMemsetAsync(st_.desc, 0, 4, st_.stream), "clear pending");
        if (!plan_.draft)
            check(cudaMemcpyAsync(st_.h_verify_argmax, st_.verify_argmax, size_t(n) * 8, cudaMemcpyDeviceToHost,
                                  st_.stream),
                  "copy argmax");
        return;
    }
    // Block: logits straight to the caller's host buffer (such blocks are not captured), and the
    // last row's top tokens on the device.
    float *logits = plan_.host_logits;
    const bool top = plan_.last_top_k > 0;
    auto last_row_top = [&](const float *row) {
        check(kern::launch_top_tokens(row, vocab, 1, plan_.last_top_candidates, plan_.last_top_k, plan_.last_top_ids,
                                      plan_.last_top_logp, st_.stream),
              "top tokens (last row)");
    };
    const bool wants = pass.wants_logits() && logits;
    if (!wants && !top) return;
    if (!wants || pass.logits_from == n - 1) {
        // The last row through the same fp32-input GEMV as a decoding step.
        lm.x = st_.h + size_t(n - 1) * D, lm.argmax = st_.d_argmax;
        check(kern::launch_gemv(lm, ctx_), "lm_head");
        if (top) last_row_top(st_.logits);
        if (wants)
            check(cudaMemcpyAsync(logits, st_.logits, size_t(vocab) * 4, cudaMemcpyDeviceToHost, st_.stream),
                  "cudaMemcpyAsync(logits)");
        return;
    }
    for (int32_t r0 = pass.logits_from; r0 < n; r0 += st_.logits_rows) {
        const int32_t m = std::min(st_.logits_rows, n - r0);
        check(kern::launch_rmsnorm_rows(st_.h + size_t(r0) * D, D, w_.final_norm, m, D, c_.norm_eps, st_.xb, ctx_),
              "final norm");
        gemm_bf16(st_.cublas, w_.lm_head, vocab, D, st_.xb, m, st_.logits, 0.f);
        if (top && r0 + m == n) last_row_top(st_.logits + size_t(m - 1) * vocab);
        check(cudaMemcpyAsync(logits + size_t(r0 - pass.logits_from) * vocab, st_.logits, size_t(m) * vocab * 4,
                              cudaMemcpyDeviceToHost, st_.stream),
              "cudaMemcpyAsync(logits)");
    }
}

void CudaBackend::enqueue_pass(CudaSequenceState &st, const Pass &pass, const CudaPassPlan &plan) {
    CudaPassOps ops(*this, st, plan);
    run_layer_program(ops, pass, config_.num_layers);
}

}  // namespace cuda
}  // namespace specla
