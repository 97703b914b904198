// The forward passes of the CUDA backend: the one-token decoding step (captured into a graph) and
// a block of n > 1 tokens (prefill and chains). Launch order and buffers only; the arithmetic is in
// kernels/.
#include <cmath>

#include "backend/cuda/cuda_backend.h"
#include "conv.cuh"
#include "embedding.cuh"
#include "gdn_chunk.cuh"
#include "gdn_recurrent.cuh"
#include "gemv.cuh"
#include "gemv_multi.cuh"
#include "norms.cuh"
#include "swiglu.cuh"

namespace specla {
namespace cuda {

namespace {

float beta_scale(const ModelConfig &c) { return c.allow_neg_eigval ? 2.f : 1.f; }

}  // namespace

void CudaBackend::enqueue_decode(CudaSequenceState &st, bool pdl) {
    const ModelConfig &c = config_;
    const InProjLayout lay(c);
    const int64_t D = c.hidden_size, VD = c.value_dim(), I = c.intermediate_size;
    const int K = c.head_k_dim, V = c.head_v_dim;
    kern::LaunchCtx ctx = launch_ctx(st.stream);
    ctx.pdl = pdl;
    kern::LaunchCtx first = ctx;
    first.pdl = false;  // its predecessor is a copy, not a kernel

    check(cudaMemcpyAsync(st.d_tokens, st.h_tokens, 4, cudaMemcpyHostToDevice, st.stream), "copy token");
    check(kern::launch_embedding(weights_->embeddings, st.d_tokens, 1, D, st.h, D, st.d_argmax, first), "embedding");
#ifdef SPECLA_KERNEL_TRACE
    int kernel_index = 0;  // in the step: trace slots
    auto trace = [&]() {
        return options_.decode_trace ? options_.decode_trace + kern::kOpTraceSlots * kernel_index++ : nullptr;
    };
#define SPECLA_SET_TRACE(params) (params).trace = trace()
#else
#define SPECLA_SET_TRACE(params) ((void)0)
#endif

    for (int l = 0; l < c.num_layers; ++l) {
        const DeviceLayer &w = weights_->layers[size_t(l)];
        kern::GemvParams in;
        in.w = w.in_proj, in.rows = lay.rows, in.cols = D;
        in.pro = kern::GemvPrologue::RmsNorm, in.x = st.h, in.norm_w = w.attn_norm, in.eps = c.norm_eps;
        in.epi = kern::GemvEpilogue::InProj, in.out = st.proj;
        in.conv_cache = st.conv ? st.conv + size_t(l) * size_t(c.conv_cache_floats_per_layer()) : nullptr;
        in.conv_w = w.conv, in.conv_size = c.conv_size, in.conv_channels = c.conv_channels();
        in.use_short_conv = c.use_short_conv;
        in.row_a = lay.a, in.row_b = lay.b, in.A_log = w.A_log, in.dt_bias = w.dt_bias;
        in.beta_scale = beta_scale(c);
        in.silu_z = c.use_gate;  // o_proj's head norm takes the gate as computed here
        SPECLA_SET_TRACE(in);
        check(kern::launch_gemv(in, ctx), "in_proj");

        kern::RecurrentParams rp;
        rp.n_tokens = 1, rp.H = c.num_heads, rp.HV = c.num_v_heads, rp.K = K, rp.V = V;
        rp.q = st.proj + lay.q, rp.k = st.proj + lay.k, rp.v = st.proj + lay.v;
        rp.g = st.proj + lay.a, rp.beta = st.proj + lay.b;
        rp.q_tstride = lay.rows, rp.q_hstride = K;
        rp.v_tstride = lay.rows, rp.v_hstride = V;
        rp.gb_tstride = lay.rows, rp.gb_hstride = 1;
        rp.state = st.recurrent + size_t(l) * size_t(c.recurrent_state_floats_per_layer());
        rp.o = st.o, rp.o_tstride = VD, rp.o_hstride = V;
        rp.normalize = 1, rp.q_scale = 1.f / std::sqrt(float(K));
        rp.pending = pending_of(st, l);  // deferred commit: applied when the device count is > 0
        rp.l2_keep_state = keep_state_in_l2_;
        SPECLA_SET_TRACE(rp);
        check(kern::launch_gdn_recurrent(rp, ctx), "recurrent step");

        kern::GemvParams op;
        op.w = w.o_proj, op.rows = D, op.cols = VD;
        op.pro = kern::GemvPrologue::HeadNorm, op.x = st.o, op.norm_w = w.o_norm, op.eps = c.norm_eps;
        op.z = c.use_gate ? st.proj + lay.g : nullptr, op.head_dim = V, op.use_gate = c.use_gate ? 2 : 0;
        op.epi = kern::GemvEpilogue::Add, op.out = st.h;
        SPECLA_SET_TRACE(op);
        check(kern::launch_gemv(op, ctx), "o_proj");

        kern::GemvParams gu;
        gu.w = w.gate_up, gu.rows = 2 * I, gu.cols = D;
        gu.pro = kern::GemvPrologue::RmsNorm, gu.x = st.h, gu.norm_w = w.mlp_norm, gu.eps = c.norm_eps;
        gu.epi = kern::GemvEpilogue::SwiGLU, gu.out = st.gu;
        SPECLA_SET_TRACE(gu);
        check(kern::launch_gemv(gu, ctx), "gate_up");

        kern::GemvParams dn;
        dn.w = w.down, dn.rows = D, dn.cols = I;
        dn.pro = kern::GemvPrologue::None, dn.x = st.gu;
        dn.epi = kern::GemvEpilogue::Add, dn.out = st.h;
        SPECLA_SET_TRACE(dn);
        check(kern::launch_gemv(dn, ctx), "down");
    }

    kern::GemvParams lm;
    lm.w = weights_->lm_head, lm.rows = c.vocab_size, lm.cols = D;
    lm.pro = kern::GemvPrologue::RmsNorm, lm.x = st.h, lm.norm_w = weights_->final_norm, lm.eps = c.norm_eps;
    lm.epi = kern::GemvEpilogue::Logits, lm.out = st.logits, lm.argmax = st.d_argmax;
    lm.clear_after_wait = st.desc;  // every layer has applied the pending factors by then
    SPECLA_SET_TRACE(lm);
    check(kern::launch_gemv(lm, ctx), "lm_head");
    check(cudaMemcpyAsync(st.h_argmax, st.d_argmax, 8, cudaMemcpyDeviceToHost, st.stream), "copy argmax");
#undef SPECLA_SET_TRACE
}

void CudaBackend::enqueue_rows_input(CudaSequenceState &st, int32_t n, unsigned long long *argmax_reset) {
    const int64_t D = config_.hidden_size;
    const kern::LaunchCtx ctx = launch_ctx(st.stream);
    kern::LaunchCtx first = ctx;
    first.pdl = false;  // its predecessor is a copy, not a kernel
    if (!is_drafter()) {
        check(kern::launch_embedding(weights_->embeddings, st.d_tokens, n, D, st.h, D, argmax_reset, first), "embedding");
        return;
    }
    // Row t of row_in: [embedding[token_t] | feature_t] (the order the training tool concatenates
    // in), then x0 = fc @ row into the residual rows. The features come from the pinned copy
    // stage_features() made, so a captured pass reads each call's values.
    check(cudaMemcpy2DAsync(st.row_in + D, size_t(2 * D) * 4, st.h_features, size_t(D) * 4, size_t(D) * 4, size_t(n),
                            cudaMemcpyHostToDevice, st.stream),
          "cudaMemcpy2DAsync(input features)");
    check(kern::launch_embedding(weights_->embeddings, st.d_tokens, n, D, st.row_in, 2 * D, argmax_reset, first),
          "embedding (drafter)");
    // The multi-row GEMV for any n (one row included): fp32 inputs, each row reduced in the
    // one-token GEMV's order, so a row's x0 is the same in a block and in a verification pass.
    kern::GemvMultiParams fc;
    fc.g.w = weights_->fc, fc.g.rows = D, fc.g.cols = 2 * D;
    fc.g.pro = kern::GemvPrologue::None, fc.g.x = st.row_in;
    fc.g.epi = kern::GemvEpilogue::Store, fc.g.out = st.h;
    fc.n = n, fc.x_ld = 2 * D, fc.out_ld = D;
    check(kern::launch_gemv_multi(fc, ctx), "fc (drafter input rows)");
}

// Y[n][rows] (fp32, row-major) = X[n][cols] (bf16) * W[rows][cols]^T + beta * Y.
void CudaBackend::gemm_bf16(CudaSequenceState &st, const uint16_t *w, int64_t rows, int64_t cols, const uint16_t *x,
                            int32_t n, float *y, float beta) {
    const float alpha = 1.f;
    check(cublasGemmEx(st.cublas, CUBLAS_OP_T, CUBLAS_OP_N, int(rows), n, int(cols), &alpha, w, CUDA_R_16BF,
                       int(cols), x, CUDA_R_16BF, int(cols), &beta, y, CUDA_R_32F, int(rows), CUBLAS_COMPUTE_32F,
                       CUBLAS_GEMM_DEFAULT),
          "cublasGemmEx");
}

namespace {

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

void CudaBackend::mix_block(CudaSequenceState &st, int layer, int32_t n) {
    const ModelConfig &c = config_;
    const InProjLayout lay(c);
    const DeviceLayer &w = weights_->layers[size_t(layer)];
    const int H = c.num_heads, HV = c.num_v_heads, K = c.head_k_dim, V = c.head_v_dim;
    const int64_t CC = c.conv_channels(), R = lay.rows;
    const kern::LaunchCtx ctx = launch_ctx(st.stream);
    const bool chunk = st.chunk_buffers && n >= options_.chunk_min_tokens;
    const int32_t C = kern::kChunk;
    const int32_t Tp = chunk ? (n + C - 1) / C * C : n;
    float *conv = st.conv ? st.conv + size_t(layer) * size_t(c.conv_cache_floats_per_layer()) : nullptr;
    float *state = st.recurrent + size_t(layer) * size_t(c.recurrent_state_floats_per_layer());

    kern::ConvPrefillParams cp;
    cp.n = n, cp.n_padded = Tp;
    cp.proj = st.proj, cp.proj_ld = R;
    cp.conv_cache = conv, cp.conv_w = w.conv, cp.W = c.conv_size, cp.use_short_conv = c.use_short_conv;
    cp.H = H, cp.HV = HV, cp.K = K, cp.V = V;
    cp.row_a = lay.a, cp.row_b = lay.b, cp.A_log = w.A_log, cp.dt_bias = w.dt_bias;
    cp.beta_scale = beta_scale(c), cp.q_scale = 1.f / std::sqrt(float(K));
    cp.q = st.q, cp.k = st.k, cp.v = st.v, cp.g = st.gl, cp.beta = st.beta;
    check(kern::launch_conv_prefill(cp, ctx), "conv + gates");
    if (c.use_short_conv)
        check(kern::launch_conv_cache_update(conv, st.proj, R, n, c.conv_size, CC, ctx), "conv cache update");

    if (chunk) {
        const int nc = Tp / C;
        // G = K K^T and QK = Q K^T per key head and chunk: row-major [C][C] outputs.
        gemm_tf32_batched(st.cublas, CUBLAS_OP_T, CUBLAS_OP_N, C, C, K, st.k, K, (long long)C * K, st.k, K,
                          (long long)C * K, st.G, C, (long long)C * C, H * nc);
        gemm_tf32_batched(st.cublas, CUBLAS_OP_T, CUBLAS_OP_N, C, C, K, st.k, K, (long long)C * K, st.q, K,
                          (long long)C * K, st.QK, C, (long long)C * C, H * nc);
        kern::ChunkPrepParams pp;
        pp.n_chunks = nc, pp.H = H, pp.HV = HV;
        pp.G = st.G, pp.QK = st.QK, pp.g = st.gl, pp.beta = st.beta;
        pp.gam = st.gam, pp.Pm = st.Pm, pp.Tb = st.Tb, pp.Tu = st.Tu;
        check(kern::launch_chunk_prep(pp, ctx), "chunk prep");
        // W = Tb K (per value head, its key head's K), U = Tu V.
        const int group = HV / H;
        if (group == 1) {
            gemm_tf32_batched(st.cublas, CUBLAS_OP_N, CUBLAS_OP_N, K, C, C, st.k, K, (long long)C * K, st.Tb, C,
                              (long long)C * C, st.W, K, (long long)C * K, HV * nc);
        } else {
            for (int hv = 0; hv < HV; ++hv)
                gemm_tf32_batched(st.cublas, CUBLAS_OP_N, CUBLAS_OP_N, K, C, C, st.k + size_t(hv / group) * Tp * K, K,
                                  (long long)C * K, st.Tb + size_t(hv) * nc * C * C, C, (long long)C * C,
                                  st.W + size_t(hv) * Tp * K, K, (long long)C * K, nc);
        }
        gemm_tf32_batched(st.cublas, CUBLAS_OP_N, CUBLAS_OP_N, V, C, C, st.v, V, (long long)C * V, st.Tu, C,
                          (long long)C * C, st.U, V, (long long)C * V, HV * nc);
        kern::ChunkPassParams sp;
        sp.n_chunks = nc, sp.H = H, sp.HV = HV, sp.K = K, sp.V = V;
        sp.q = st.q, sp.k = st.k, sp.W = st.W, sp.U = st.U, sp.Pm = st.Pm, sp.gam = st.gam;
        sp.state = state, sp.o = st.o;
        check(kern::launch_chunk_state_pass(sp, ctx), "chunk state pass");
    } else {
        kern::RecurrentParams rp;
        rp.n_tokens = n, rp.H = H, rp.HV = HV, rp.K = K, rp.V = V;
        rp.q = st.q, rp.k = st.k, rp.v = st.v, rp.g = st.gl, rp.beta = st.beta;
        rp.q_tstride = K, rp.q_hstride = int64_t(Tp) * K;
        rp.v_tstride = V, rp.v_hstride = int64_t(Tp) * V;
        rp.gb_tstride = 1, rp.gb_hstride = Tp;
        rp.state = state;
        rp.o = st.o, rp.o_tstride = V, rp.o_hstride = int64_t(Tp) * V;
        rp.normalize = 0;
        rp.pending = pending_of(st, layer);
        check(kern::launch_gdn_recurrent(rp, ctx), "recurrent block");
    }
    check(kern::launch_gated_norm_rows(st.o, V, int64_t(Tp) * V, c.use_gate ? st.proj + lay.g : nullptr, R,
                                       w.o_norm, n, HV, V, c.norm_eps, st.xb, ctx),
          "gated norm");
}

void CudaBackend::enqueue_block(CudaSequenceState &st, int32_t n, LogitsRows rows, float *logits) {
    const ModelConfig &c = config_;
    const InProjLayout lay(c);
    const int64_t D = c.hidden_size, I = c.intermediate_size, VD = c.value_dim(), vocab = c.vocab_size;
    kern::LaunchCtx ctx = launch_ctx(st.stream);
    enqueue_rows_input(st, n, st.d_argmax);
    for (int l = 0; l < c.num_layers; ++l) {
        const DeviceLayer &w = weights_->layers[size_t(l)];
        check(kern::launch_rmsnorm_rows(st.h, D, w.attn_norm, n, D, c.norm_eps, st.xb, ctx), "attn norm");
        gemm_bf16(st, w.in_proj, lay.rows, D, st.xb, n, st.proj, 0.f);
        mix_block(st, l, n);
        gemm_bf16(st, w.o_proj, D, VD, st.xb, n, st.h, 1.f);
        check(kern::launch_rmsnorm_rows(st.h, D, w.mlp_norm, n, D, c.norm_eps, st.xb, ctx), "mlp norm");
        gemm_bf16(st, w.gate_up, 2 * I, D, st.xb, n, st.gu, 0.f);
        check(kern::launch_swiglu_rows(st.gu, n, I, st.xb, ctx), "swiglu");
        gemm_bf16(st, w.down, D, I, st.xb, n, st.h, 1.f);
    }
    if (rows == LogitsRows::None) return;
    if (rows == LogitsRows::Last) {
        // The last row through the same fp32-input GEMV as a decoding step.
        kern::GemvParams lm;
        lm.w = weights_->lm_head, lm.rows = vocab, lm.cols = D;
        lm.pro = kern::GemvPrologue::RmsNorm, lm.x = st.h + size_t(n - 1) * D, lm.norm_w = weights_->final_norm;
        lm.eps = c.norm_eps;
        lm.epi = kern::GemvEpilogue::Logits, lm.out = st.logits, lm.argmax = st.d_argmax;
        check(kern::launch_gemv(lm, ctx), "lm_head");
        check(cudaMemcpyAsync(logits, st.logits, size_t(vocab) * 4, cudaMemcpyDeviceToHost, st.stream),
              "cudaMemcpyAsync(logits)");
        return;
    }
    for (int32_t r0 = 0; r0 < n; r0 += st.logits_rows) {
        const int32_t m = std::min(st.logits_rows, n - r0);
        check(kern::launch_rmsnorm_rows(st.h + size_t(r0) * D, D, weights_->final_norm, m, D, c.norm_eps, st.xb, ctx),
              "final norm");
        gemm_bf16(st, weights_->lm_head, vocab, D, st.xb, m, st.logits, 0.f);
        check(cudaMemcpyAsync(logits + size_t(r0) * vocab, st.logits, size_t(m) * vocab * 4, cudaMemcpyDeviceToHost,
                              st.stream),
              "cudaMemcpyAsync(logits)");
    }
}

}  // namespace cuda
}  // namespace specla
