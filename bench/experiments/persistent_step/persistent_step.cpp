// The persistent decoding step on a CUDA backend's sequence state (see persistent_step.h).
#include "persistent_step.h"

#include <cmath>
#include <vector>

#include "backend/cuda/cuda_util.h"
#include "cuda_probe.h"
#include "util/error.h"

namespace specla {
namespace experiments {

using cuda::check;

namespace {

cuda::CudaSequenceState &cuda_state(SequenceState &s) {
    auto *p = dynamic_cast<cuda::CudaSequenceState *>(&s);
    require(p != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "the persistent step needs a CUDA sequence state");
    return *p;
}

// The model's shape and weights (the buffers are filled in by PersistentStep::params).
kern::DecodeStepParams shape_params(const cuda::CudaBackend &b) {
    const ModelConfig &c = b.config();
    const InProjLayout lay(c);
    const cuda::DeviceWeights &w = b.device_weights();
    kern::DecodeStepParams p;
    p.n_layers = c.num_layers, p.D = int32_t(c.hidden_size), p.H = c.num_heads, p.HV = c.num_v_heads;
    p.K = c.head_k_dim, p.V = c.head_v_dim, p.I = int32_t(c.intermediate_size), p.vocab = c.vocab_size;
    p.conv_size = c.conv_size, p.use_conv = c.use_short_conv, p.use_gate = c.use_gate;
    p.R = lay.rows, p.CC = c.conv_channels(), p.row_g = lay.g, p.row_a = lay.a, p.row_b = lay.b;
    p.eps = c.norm_eps, p.beta_scale = c.allow_neg_eigval ? 2.f : 1.f, p.q_scale = 1.f / std::sqrt(float(c.head_k_dim));
    p.emb = w.embeddings, p.lm_head = w.lm_head, p.final_norm = w.final_norm;
    return p;
}

}  // namespace

bool PersistentStep::supported(const cuda::CudaBackend &backend) {
    cuda::DeviceGuard g(backend.device());
    return kern::decode_step_supported(shape_params(backend), backend.device());
}

PersistentStep::PersistentStep(cuda::CudaBackend &backend, SequenceState &state, bool use_graph)
    : backend_(backend), st_(cuda_state(state)), use_graph_(use_graph) {
    require(supported(backend), SPECLA_ERR_UNSUPPORTED, "the persistent step does not cover this model on this device");
    const ModelConfig &c = backend.config();
    cuda::DeviceGuard g(backend.device());
    // Per-layer pointers of this state (the factor buffers of a deferred commit included).
    const size_t L = size_t(c.num_layers);
    std::vector<kern::DecodeLayer> layers(L);
    for (size_t l = 0; l < L; ++l) {
        const cuda::DeviceLayer &w = backend.device_weights().layers[l];
        kern::DecodeLayer &d = layers[l];
        d.in_proj = w.in_proj, d.o_proj = w.o_proj, d.gate_up = w.gate_up, d.down = w.down;
        d.attn_norm = w.attn_norm, d.conv_w = w.conv, d.A_log = w.A_log, d.dt_bias = w.dt_bias;
        d.o_norm = w.o_norm, d.mlp_norm = w.mlp_norm;
        d.state = st_.recurrent + l * size_t(c.recurrent_state_floats_per_layer());
        d.conv_cache = st_.conv ? st_.conv + l * size_t(c.conv_cache_floats_per_layer()) : nullptr;
        d.pending = backend.pending_of(st_, int(l));
    }
    check(cudaMalloc(reinterpret_cast<void **>(&d_layers_), L * sizeof(kern::DecodeLayer)), "cudaMalloc(layers)");
    check(cudaMalloc(reinterpret_cast<void **>(&d_barrier_), sizeof(unsigned int)), "cudaMalloc(barrier)");
    check(cudaMemcpyAsync(d_layers_, layers.data(), L * sizeof(kern::DecodeLayer), cudaMemcpyHostToDevice, st_.stream),
          "cudaMemcpyAsync(layers)");
    check(cudaMemsetAsync(d_barrier_, 0, sizeof(unsigned int), st_.stream), "cudaMemsetAsync(barrier)");
    check(cudaStreamSynchronize(st_.stream), "cudaStreamSynchronize");
}

PersistentStep::~PersistentStep() {
    (void)cudaSetDevice(backend_.device());
    (void)cudaStreamSynchronize(st_.stream);
    if (graph_) (void)cudaGraphExecDestroy(graph_);
    (void)cudaFree(d_layers_);
    (void)cudaFree(d_barrier_);
    (void)cudaGetLastError();
}

kern::DecodeStepParams PersistentStep::params() const {
    kern::DecodeStepParams p = shape_params(backend_);
    p.layers = d_layers_, p.token = st_.d_tokens;
    p.h = st_.h, p.proj = st_.proj, p.o = st_.o, p.act = st_.gu, p.logits = st_.logits;
    p.argmax = st_.d_argmax, p.pending_desc = st_.desc, p.barrier = d_barrier_;
    p.trace = trace_;
    return p;
}

void PersistentStep::set_trace(unsigned long long *trace) {
    trace_ = trace;
    if (graph_) (void)cudaGraphExecDestroy(graph_);
    graph_ = nullptr;
}

void PersistentStep::enqueue() {
    kern::LaunchCtx ctx = backend_.launch_ctx(st_.stream);
    check(cudaMemcpyAsync(st_.d_tokens, st_.h_tokens, 4, cudaMemcpyHostToDevice, st_.stream), "copy token");
    // The barrier counter back to zero every step, so that one failed step cannot poison the next.
    check(cudaMemsetAsync(d_barrier_, 0, sizeof(unsigned int), st_.stream), "reset barrier");
    check(kern::launch_decode_step(params(), ctx), "persistent decoding step");
    check(cudaMemcpyAsync(st_.h_argmax, st_.d_argmax, 8, cudaMemcpyDeviceToHost, st_.stream), "copy argmax");
}

void PersistentStep::run() {
    // As the backend's own step: the first step eager, then a captured graph where it can be had.
    if (use_graph_ && !graph_ && !graph_failed_ && eager_steps_ >= 1) {
        cudaGraph_t g = nullptr;
        check(cudaStreamBeginCapture(st_.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        bool ok = true;
        try {
            enqueue();
        } catch (const Error &) {
            ok = false;
        }
        const cudaError_t ec = cudaStreamEndCapture(st_.stream, &g);
        if (ok && ec == cudaSuccess && g && cudaGraphInstantiate(&graph_, g, 0) == cudaSuccess) {
            mode_ = "persistent, graph";
        } else {
            (void)cudaGetLastError();
            graph_ = nullptr;
            graph_failed_ = true;
        }
        if (g) (void)cudaGraphDestroy(g);
    }
    if (graph_) {
        check(cudaGraphLaunch(graph_, st_.stream), "cudaGraphLaunch");
    } else {
        enqueue();
        eager_steps_ += 1;
    }
    // The step applied any pending factors and cleared the device count (the backend's run_decode
    // keeps its CommitState the same way).
    st_.commit.state_moved();
    st_.commit.pending_applied();
}

int32_t PersistentStep::step(int32_t token, float *logits) {
    cuda::DeviceGuard g(backend_.device());
    st_.h_tokens[0] = token;
    run();
    if (logits)
        check(cudaMemcpyAsync(logits, st_.logits, size_t(backend_.config().vocab_size) * 4, cudaMemcpyDeviceToHost,
                              st_.stream),
              "cudaMemcpyAsync(logits)");
    check(cudaStreamSynchronize(st_.stream), "persistent decoding step");
    return kern::argmax_key_id(*st_.h_argmax);
}

float PersistentStep::time_steps(int32_t token, int32_t steps) {
    cuda::DeviceGuard g(backend_.device());
    st_.h_tokens[0] = token;
    if (eager_steps_ == 0) run();
    run();  // captures the graph where it is used
    check(cudaStreamSynchronize(st_.stream), "warm-up step");
    return cuda::stream_elapsed_ms(st_.stream, [&] {
        for (int32_t i = 0; i < steps; ++i) run();
    });
}

}  // namespace experiments
}  // namespace specla
