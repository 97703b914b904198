#include "backend/cuda/cuda_backend.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "backend/cuda/kernel_image.h"
#include "gdn_chunk.cuh"
#include "gdn_recurrent.cuh"
#include "top_tokens.cuh"
#include "util/log.h"

namespace specla {

namespace cuda {

namespace {

constexpr size_t kCublasWorkspaceBytes = size_t(16) << 20;

// Lays out the scratch of a state inside one arena allocation: a sizing pass, then the real one.
struct Carver {
    char *base = nullptr;
    size_t offset = 0;
    template <typename T>
    T *take(size_t count) {
        const size_t at = offset;
        offset += (count * sizeof(T) + 255) / 256 * 256;
        return base ? reinterpret_cast<T *>(base + at) : nullptr;
    }
};

}  // namespace

CudaSequenceState::~CudaSequenceState() {
    // Never throw from here: errors are ignored (the device may already be in a failed state).
    (void)cudaSetDevice(device);
    if (stream) (void)cudaStreamSynchronize(stream);
    const PassLaunchCounts &pl = pass_launches;
    if (pl.replays + pl.captures + pl.eager > 0) {
        size_t with_pdl = 0;
        for (const PassGraph &pg : graphs) with_pdl += pg.pdl ? 1 : 0;
        log(SPECLA_LOG_DEBUG, "CUDA sequence state: ", pl.replays, " passes replayed from graphs, ", pl.captures,
            " captured, ", pl.eager, " run eagerly (", seen_shapes.size(), " shapes seen, ", graphs.size(),
            " graphs kept, ", with_pdl, " of them with programmatic dependent launch edges)");
    }
    clear_graphs();
    if (cublas) (void)cublasDestroy(cublas);
    if (stream) (void)cudaStreamDestroy(stream);
    if (h_tokens) (void)cudaFreeHost(h_tokens);
    if (h_argmax) (void)cudaFreeHost(h_argmax);
    if (h_sampled) (void)cudaFreeHost(h_sampled);
    if (h_gather) (void)cudaFreeHost(h_gather);
    if (h_tree_tables) (void)cudaFreeHost(h_tree_tables);
    if (h_desc) (void)cudaFreeHost(h_desc);
    if (h_verify_argmax) (void)cudaFreeHost(h_verify_argmax);
    if (h_top_ids) (void)cudaFreeHost(h_top_ids);
    if (h_top_logp) (void)cudaFreeHost(h_top_logp);
    if (h_features) (void)cudaFreeHost(h_features);
    if (h_draft_root) (void)cudaFreeHost(h_draft_root);
    if (h_draft_out) (void)cudaFreeHost(h_draft_out);
    if (desc_event) (void)cudaEventDestroy(desc_event);
    (void)cudaGetLastError();
}

void CudaSequenceState::clear_graphs() {
    for (auto &pg : graphs)
        if (pg.exec) (void)cudaGraphExecDestroy(pg.exec);
    graphs.clear();
    seen_shapes.clear();
}

CudaBackend::CudaBackend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                         const CudaBackendOptions &options)
    : CudaBackend(config, weights, device, options, nullptr) {}

CudaBackend::CudaBackend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                         const CudaBackendOptions &options, std::shared_ptr<const DeviceWeights> head)
    : config_(config), device_(device), options_(options) {
    const int64_t D = config.hidden_size;
    require(weights.fc.empty() || (weights.fc.rows == D && weights.fc.cols == 2 * D), SPECLA_ERR_INTERNAL,
            "drafter fc matrix is ", weights.fc.rows, " x ", weights.fc.cols, ", expected ", D, " x ", 2 * D);
    require(!head || !weights.fc.empty(), SPECLA_ERR_INTERNAL, "a shared output head is for drafter models (fc) only");
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        fail(SPECLA_ERR_BACKEND_UNAVAILABLE, "the CUDA backend found no usable GPU: cudaGetDeviceCount failed with ",
             cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
    }
    if (count == 0) fail(SPECLA_ERR_BACKEND_UNAVAILABLE, "the CUDA backend found no GPU on this machine");
    if (device < 0 || device >= count)
        fail(SPECLA_ERR_BACKEND_UNAVAILABLE, "CUDA device ", device, " does not exist (", count,
             " device", count == 1 ? "" : "s", " found)");
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    sm_count_ = prop.multiProcessorCount;
    keep_state_in_l2_ = config.recurrent_state_floats_per_layer() * config.num_layers * int64_t(sizeof(float)) <=
                        int64_t(prop.l2CacheSize);
    require(config.head_k_dim <= kern::kRecurrentMaxK, SPECLA_ERR_UNSUPPORTED, "the CUDA backend supports head_dim up to ",
            kern::kRecurrentMaxK, ", the model has ", config.head_k_dim);
    DeviceGuard g(device);
    // Creates the context now, so that a broken driver shows up here with a clear message.
    check(cudaFree(nullptr), "CUDA context creation");
    // Refuses a device that none of the built architectures runs on (an older GPU, or a newer one
    // without a PTX image to JIT) here rather than at the first launch.
    require_kernel_image(device, prop);
    const bool shared_head = head != nullptr;
    weights_ = std::make_shared<DeviceWeights>(config, weights, device, std::move(head));
    arena_ = std::make_shared<Arena>(make_cuda_block_provider(device), options.arena_block_bytes,
                                     Arena::kDefaultAlignment, options.arena_budget_bytes);
    log(SPECLA_LOG_INFO, "CUDA ", shared_head ? "drafter " : "", "backend on device ", device, " (", prop.name, ", ",
        sm_count_, " SMs): ", weights_->bytes() >> 20, " MiB of weights",
        shared_head ? " (embeddings, final norm and output head shared with the target)" : "");
}

std::unique_ptr<Backend> CudaBackend::create_drafter_backend(const ModelConfig &config, ModelWeights own) const {
    require(config.hidden_size == config_.hidden_size && config.vocab_size == config_.vocab_size &&
                config.tie_word_embeddings == config_.tie_word_embeddings,
            SPECLA_ERR_INTERNAL, "drafter config does not match the target it shares the output head with");
    require(!own.fc.empty(), SPECLA_ERR_INTERNAL, "a drafter model without its fc matrix");
    CudaBackendOptions options = options_;
#ifdef SPECLA_KERNEL_TRACE
    options.decode_trace = nullptr;  // the target's decoding-step timeline; a drafter has no such step
#endif
    // The head is this backend's device tensors: the drafter's DeviceWeights hold weights_ (shared
    // ownership), so they stay valid for as long as the drafter lives, even past this backend.
    return std::unique_ptr<Backend>(new CudaBackend(config, own, device_, options, weights_));
}

CudaBackend::~CudaBackend() = default;

CudaSequenceState &CudaBackend::cast(SequenceState &s) const {
    auto *p = dynamic_cast<CudaSequenceState *>(&s);
    require(p != nullptr, SPECLA_ERR_INTERNAL, "a sequence state of another backend was passed to the CUDA backend");
    return *p;
}

kern::LaunchCtx CudaBackend::launch_ctx(cudaStream_t stream) const {
    kern::LaunchCtx ctx;
    ctx.stream = stream;
    ctx.pdl = options_.use_pdl;
    ctx.sm_count = sm_count_;
    return ctx;
}

std::unique_ptr<SequenceState> CudaBackend::create_state(const SessionLimits &limits) {
    const ModelConfig &c = config_;
    DeviceGuard g(device_);
    auto st = std::make_unique<CudaSequenceState>();
    st->device = device_;
    st->arena = arena_;
    const int32_t tree_rows = CommitState::factor_rows(limits);
    st->capacity = std::max(std::max(limits.max_batch_tokens, tree_rows), 1);
    const int32_t C = kern::kChunk;
    st->padded = (st->capacity + C - 1) / C * C;
    st->logits_rows = std::min(st->capacity, std::max(64, tree_rows));
    st->chunk_buffers = kern::chunk_form_supported(c.head_k_dim, c.head_v_dim) &&
                        st->capacity >= options_.chunk_min_tokens;

    const size_t L = size_t(c.num_layers), Tm = size_t(st->capacity), Tp = size_t(st->padded);
    const size_t D = size_t(c.hidden_size), H = size_t(c.num_heads), HV = size_t(c.num_v_heads);
    const size_t K = size_t(c.head_k_dim), V = size_t(c.head_v_dim), I = size_t(c.intermediate_size);
    const size_t VD = size_t(c.value_dim()), R = size_t(InProjLayout(c).rows), vocab = size_t(c.vocab_size);
    const size_t nc = Tp / size_t(C);

    st->state_buf = ArenaBuffer(*arena_, L * size_t(c.recurrent_state_floats_per_layer()) * 4, "recurrent state");
    st->recurrent = st->state_buf.as<float>();
    const size_t conv_floats = L * size_t(c.conv_cache_floats_per_layer());
    if (conv_floats) {
        st->conv_buf = ArenaBuffer(*arena_, conv_floats * 4, "conv cache");
        st->conv = st->conv_buf.as<float>();
    }

    const size_t sampling_temp = kern::sampling_temp_bytes(int32_t(vocab));
    auto layout = [&](Carver &cv) {
        st->h = cv.take<float>(Tm * D);
        st->xb = cv.take<uint16_t>(Tm * std::max(std::max(D, VD), I));
        st->proj = cv.take<float>(Tm * R);
        st->gu = cv.take<float>(Tm * 2 * I);
        st->logits = cv.take<float>(size_t(st->logits_rows) * vocab);
        st->q = cv.take<float>(H * Tp * K);
        st->k = cv.take<float>(H * Tp * K);
        st->v = cv.take<float>(HV * Tp * V);
        st->o = cv.take<float>(HV * Tp * V);
        st->gl = cv.take<float>(HV * Tp);
        st->beta = cv.take<float>(HV * Tp);
        if (st->chunk_buffers) {
            st->gam = cv.take<float>(HV * Tp);
            st->G = cv.take<float>(H * nc * C * C);
            st->QK = cv.take<float>(H * nc * C * C);
            st->Pm = cv.take<float>(HV * nc * C * C);
            st->Tb = cv.take<float>(HV * nc * C * C);
            st->Tu = cv.take<float>(HV * nc * C * C);
            st->W = cv.take<float>(HV * Tp * K);
            st->U = cv.take<float>(HV * Tp * V);
        }
        st->d_tokens = cv.take<int32_t>(Tm);
        st->d_sampled = cv.take<int32_t>(1);
        st->d_argmax = cv.take<unsigned long long>(1);
        st->sampling.keys_in = cv.take<float>(vocab);
        st->sampling.keys_out = cv.take<float>(vocab);
        st->sampling.ids_in = cv.take<int32_t>(vocab);
        st->sampling.ids_out = cv.take<int32_t>(vocab);
        st->sampling.w = cv.take<double>(vocab);
        st->sampling.cum = cv.take<double>(vocab);
        st->sampling.pd = cv.take<double>(vocab);
        st->sampling.scalars = cv.take<int32_t>(4);
        st->d_gather = cv.take<double>(1 + kern::kTokenListMax);
        st->sampling.temp = cv.take<char>(sampling_temp);
        st->sampling.temp_bytes = sampling_temp;
        st->cublas_workspace = cv.take<char>(kCublasWorkspaceBytes);
        st->cublas_workspace_bytes = kCublasWorkspaceBytes;
        if (is_drafter()) st->row_in = cv.take<float>(Tm * 2 * D);
    };
    Carver sizing;
    layout(sizing);
    st->scratch_buf = ArenaBuffer(*arena_, sizing.offset, "sequence scratch");
    Carver real;
    real.base = st->scratch_buf.as<char>();
    layout(real);

    check(cudaStreamCreateWithFlags(&st->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    st->alloc_pinned(st->h_tokens, Tm * 4, "cudaHostAlloc");
    st->alloc_pinned(st->h_argmax, 8, "cudaHostAlloc");
    st->alloc_pinned(st->h_sampled, 4, "cudaHostAlloc");
    st->alloc_pinned(st->h_gather, (1 + kern::kTokenListMax) * sizeof(double), "cudaHostAlloc");
    if (is_drafter()) st->alloc_pinned(st->h_features, Tm * D * 4, "cudaHostAlloc(input features)");
    check(cublasCreate(&st->cublas), "cublasCreate");
    check(cublasSetStream(st->cublas, st->stream), "cublasSetStream");
    check(cublasSetWorkspace(st->cublas, st->cublas_workspace, st->cublas_workspace_bytes), "cublasSetWorkspace");
    check(cublasSetMathMode(st->cublas, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    init_verify(*st, limits);
    reset_state(*st);
    check(cudaStreamSynchronize(st->stream), "cudaStreamSynchronize");
    return st;
}

void CudaBackend::reset_state(SequenceState &state) {
    CudaSequenceState &st = cast(state);
    DeviceGuard g(device_);
    check(cudaMemsetAsync(st.recurrent, 0, st.state_buf.bytes(), st.stream), "cudaMemsetAsync(state)");
    if (st.conv) check(cudaMemsetAsync(st.conv, 0, st.conv_buf.bytes(), st.stream), "cudaMemsetAsync(conv)");
    if (st.desc) check(cudaMemsetAsync(st.desc, 0, 4, st.stream), "cudaMemsetAsync(pending)");
    st.commit.reset();
}

void CudaBackend::read_recurrent_state(SequenceState &state, int32_t layer, float *out) {
    CudaSequenceState &st = cast(state);
    require(layer >= 0 && layer < config_.num_layers, SPECLA_ERR_INVALID_ARGUMENT, "layer ", layer, " out of range");
    DeviceGuard g(device_);
    flush_commit(st);
    const size_t n = size_t(config_.recurrent_state_floats_per_layer());
    check(cudaMemcpyAsync(out, st.recurrent + size_t(layer) * n, n * 4, cudaMemcpyDeviceToHost, st.stream),
          "cudaMemcpyAsync(read state)");
    check(cudaStreamSynchronize(st.stream), "cudaStreamSynchronize");
}

MemoryStats CudaBackend::memory_stats() const {
    MemoryStats m;
    m.weight_bytes = weights_->bytes();
    const ArenaStats a = arena_->stats();
    m.arena_reserved_bytes = a.reserved_bytes;
    m.arena_used_bytes = a.used_bytes;
    m.arena_peak_bytes = a.peak_used_bytes;
    m.arena_blocks = a.blocks;
    m.live_allocations = a.live_allocations;
    return m;
}

namespace {

// Captured passes kept per session (launch shapes: the decoding step, and per node count the few
// hybrid schedules trees fall into: CudaBackend::verify_tree's key), and shapes remembered as seen
// once.
constexpr size_t kMaxPassGraphs = 128;
constexpr size_t kMaxSeenShapes = 8 * kMaxPassGraphs;
// The decoding step's launch shape (verification keys start with 1).
const std::vector<int32_t> kStepKey = {0};

}  // namespace

void CudaBackend::launch_pass(CudaSequenceState &st, const Pass &pass, CudaPassPlan plan,
                              const std::vector<int32_t> &key) {
    launch_keyed(st, key, plan.pdl, key == kStepKey ? "decoding step" : "verification pass", [&](bool pdl) {
        CudaPassPlan p = plan;
        p.pdl = pdl;
        enqueue_pass(st, pass, p);
    });
}

void CudaBackend::launch_keyed(CudaSequenceState &st, const std::vector<int32_t> &key, bool pdl, const char *what,
                               const std::function<void(bool pdl)> &enqueue) {
    // A pass is 5-7 launches per layer: replayed from a captured graph per launch shape from the
    // second time that shape is seen, so that the host's launch rate does not bound small models
    // (the first run also resolves lazy per-kernel setup outside any capture). The values that
    // change between calls of one shape (tokens, tree tables, features) travel in pinned mirrors
    // that the pass copies in.
    CudaSequenceState::PassLaunchCounts &counts = st.pass_launches;
    if (!options_.use_graph || key.empty()) {
        ++counts.eager;
        enqueue(pdl);
        return;
    }
    for (const auto &pg : st.graphs)
        if (pg.key == key) {
            if (pg.exec) {
                ++counts.replays;
                check(cudaGraphLaunch(pg.exec, st.stream), "cudaGraphLaunch");
            } else {
                ++counts.eager;
                enqueue(pdl);  // its capture failed: eager
            }
            return;
        }
    bool seen = false;
    for (const auto &k : st.seen_shapes) seen = seen || k == key;
    if (!seen || st.graphs.size() >= kMaxPassGraphs) {
        if (!seen && st.seen_shapes.size() < kMaxSeenShapes) st.seen_shapes.push_back(key);
        ++counts.eager;
        enqueue(pdl);
        return;
    }
    ++counts.captures;
    // Capture with PDL edges first; if the runtime refuses, without; if that fails too, eager.
    cudaGraphExec_t exec = nullptr;
    bool captured_pdl = false;
    for (int attempt = 0; attempt < (pdl ? 2 : 1) && !exec; ++attempt) {
        captured_pdl = pdl && attempt == 0;
        cudaGraph_t graph = nullptr;
        check(cudaStreamBeginCapture(st.stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
        bool ok = true;
        try {
            enqueue(captured_pdl);
        } catch (const Error &) {
            ok = false;
        }
        const cudaError_t ec = cudaStreamEndCapture(st.stream, &graph);
        if (ok && ec == cudaSuccess && graph && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) exec = nullptr;
        if (graph) (void)cudaGraphDestroy(graph);
        (void)cudaGetLastError();
    }
    st.graphs.push_back({key, exec, exec && captured_pdl});
    if (exec) {
        check(cudaGraphLaunch(exec, st.stream), "cudaGraphLaunch");
    } else {
        log(SPECLA_LOG_WARN, "CUDA graph capture of a ", what, " failed; running it without a graph");
        enqueue(pdl);
    }
}

void CudaBackend::run_decode(CudaSequenceState &st) {
    require(!is_drafter(), SPECLA_ERR_UNSUPPORTED,
            "the CUDA decoding step (decode_and_sample) does not run drafter models: a drafter's rows need "
            "their input features (eval_chain, verify_tree)");
    Pass pass;
    pass.n = 1;
    pass.tokens = st.h_tokens;
    pass.logits_from = 0;
    pass.argmax = true;
    CudaPassPlan plan;
    plan.form = CudaPassForm::Step;
    plan.pdl = options_.use_pdl;
    st.commit.state_moved();
    launch_pass(st, pass, plan, kStepKey);
    // The step's recurrent kernels applied a deferred commit's factors; its lm_head GEMV clears
    // the device count.
    st.commit.pending_applied();
}

int32_t CudaBackend::decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling, double u,
                                       float *logits, float *features) {
    CudaSequenceState &st = cast(state);
    DeviceGuard g(device_);
    const int32_t vocab = config_.vocab_size;
    // The previous step's argmax copy may still be in flight only if the caller did not wait for
    // it, which this function always does; h_tokens is therefore free to overwrite.
    st.h_tokens[0] = token;
    run_decode(st);
    copy_features(st, 0, 1, features);  // the captured step leaves the row in h like a block's
    int32_t result;
    if (sampling.greedy()) {
        if (logits)
            check(cudaMemcpyAsync(logits, st.logits, size_t(vocab) * 4, cudaMemcpyDeviceToHost, st.stream),
                  "cudaMemcpyAsync(logits)");
        check(cudaStreamSynchronize(st.stream), "decoding step");
        result = kern::argmax_key_id(*st.h_argmax);
    } else {
        check(kern::launch_sample(st.logits, vocab, sampling.temperature, sampling.top_k, sampling.top_p, u,
                                  st.sampling, st.d_sampled, st.stream),
              "sampling kernels");
        check(cudaMemcpyAsync(st.h_sampled, st.d_sampled, 4, cudaMemcpyDeviceToHost, st.stream),
              "cudaMemcpyAsync(token)");
        if (logits)
            check(cudaMemcpyAsync(logits, st.logits, size_t(vocab) * 4, cudaMemcpyDeviceToHost, st.stream),
                  "cudaMemcpyAsync(logits)");
        check(cudaStreamSynchronize(st.stream), "decoding step");
        result = *st.h_sampled;
    }
    return result;
}

void CudaBackend::stage_features(CudaSequenceState &st, const float *features_in, int32_t n) {
    const bool drafter = is_drafter();
    require(drafter == (features_in != nullptr), SPECLA_ERR_INTERNAL,
            drafter ? "a drafter model's pass needs every row's input feature"
                    : "input features given to a model that is not a drafter (no fc)");
    if (!drafter) return;
    require(n >= 1 && n <= st.capacity, SPECLA_ERR_INTERNAL, "input features of ", n,
            " rows exceed the state's capacity ", st.capacity);
    // The previous pass's copy out of h_features is complete: every pass synchronises its stream
    // before returning. The caller's buffer is read here, synchronously, and not kept.
    std::memcpy(st.h_features, features_in, size_t(n) * size_t(config_.hidden_size) * sizeof(float));
}

void CudaBackend::copy_top_rows(CudaSequenceState &st, size_t bytes) {
    check(cudaMemcpyAsync(st.h_top_ids, st.top_ids, bytes, cudaMemcpyDeviceToHost, st.stream), "copy top ids");
    check(cudaMemcpyAsync(st.h_top_logp, st.top_logp, bytes, cudaMemcpyDeviceToHost, st.stream), "copy top logps");
}

void CudaBackend::read_top_rows(const CudaSequenceState &st, const TopTokens &out, size_t bytes) {
    std::memcpy(out.ids, st.h_top_ids, bytes);
    std::memcpy(out.logp, st.h_top_logp, bytes);
}

void CudaBackend::copy_features(CudaSequenceState &st, int32_t from, int32_t n, float *out) {
    // The residual rows after the last layer: the output head reads them through its norm
    // prologue (or a separate norm into xb) and leaves them as they are.
    const size_t D = size_t(config_.hidden_size);
    if (out && from < n)
        check(cudaMemcpyAsync(out, st.h + size_t(from) * D, size_t(n - from) * D * 4, cudaMemcpyDeviceToHost, st.stream),
              "cudaMemcpyAsync(features)");
}

void CudaBackend::eval_chain(SequenceState &state, const int32_t *tokens, int32_t n, LogitsRows rows, float *logits,
                             const RowFeatures &features, const TopTokens &last_top) {
    CudaSequenceState &st = cast(state);
    require(n >= 1 && n <= st.capacity, SPECLA_ERR_INTERNAL, "eval_chain: block of ", n,
            " tokens exceeds the state's capacity ", st.capacity);
    const int32_t vocab = config_.vocab_size;
    const bool top = last_top.k > 0;
    if (top) check_top_tokens(last_top, vocab);
    DeviceGuard g(device_);
    stage_features(st, features.in, n);
    // The last row's top tokens land in the verification's top-token rows (row 0).
    const size_t top_bytes = top ? size_t(last_top.k) * 4 : 0;
    auto finish = [&](const char *what) {
        check(cudaStreamSynchronize(st.stream), what);
        if (top) read_top_rows(st, last_top, top_bytes);
    };
    // One row of a target model: the decoding step (graph replay). A drafter model's rows go
    // through the block form, one row included (its input rows are not the decoding step's).
    if (n == 1 && !is_drafter()) {
        st.h_tokens[0] = tokens[0];
        run_decode(st);
        if (rows != LogitsRows::None && logits)
            check(cudaMemcpyAsync(logits, st.logits, size_t(vocab) * 4, cudaMemcpyDeviceToHost, st.stream),
                  "cudaMemcpyAsync(logits)");
        if (top) {
            check(kern::launch_top_tokens(st.logits, vocab, 1, last_top.n_candidates, last_top.k, st.top_ids,
                                          st.top_logp, st.stream),
                  "top tokens (last row)");
            copy_top_rows(st, top_bytes);
        }
        copy_features(st, 0, 1, features.out);
        finish("eval_chain");
        return;
    }
    st.commit.state_moved();
    CudaPassPlan plan = block_plan(st, n);
    plan.host_logits = logits;
    if (top) {
        plan.last_top_k = last_top.k, plan.last_top_candidates = last_top.n_candidates;
        plan.last_top_ids = st.top_ids, plan.last_top_logp = st.top_logp;
    }
    // Pending factors: applied by the recurrent kernels of the block; the chunk form has no pre-pass
    // for them (a separate commit pass first).
    if (st.commit.pending() > 0 && plan.chunk) flush_commit(st);
    std::memcpy(st.h_tokens, tokens, size_t(n) * 4);
    Pass pass;
    pass.n = n;
    pass.tokens = st.h_tokens;
    pass.features_in = features.in;
    pass.logits_from = !logits || rows == LogitsRows::None ? n : rows == LogitsRows::Last ? n - 1 : 0;
    pass.features_from = features.out ? 0 : n;
    launch_pass(st, pass, plan, {});  // blocks are not captured
    if (top) copy_top_rows(st, top_bytes);
    copy_features(st, 0, n, features.out);
    clear_pending_after_block(st);
    finish("eval_chain");
}

CudaPassPlan CudaBackend::block_plan(const CudaSequenceState &st, int32_t n) const {
    CudaPassPlan plan;
    plan.form = CudaPassForm::Block;
    plan.pdl = options_.use_pdl;
    plan.chunk = st.chunk_buffers && n >= options_.chunk_min_tokens;
    plan.padded_rows = plan.chunk ? (n + kern::kChunk - 1) / kern::kChunk * kern::kChunk : n;
    return plan;
}

void CudaBackend::clear_pending_after_block(CudaSequenceState &st) {
    // The block's recurrent kernels applied the pending factors: clear the device count.
    if (st.commit.pending() == 0) return;
    check(cudaMemsetAsync(st.desc, 0, 4, st.stream), "clear pending");
    st.commit.pending_applied();
}

std::string CudaBackend::decode_mode(SequenceState &state) const {
    if (!options_.use_graph) return "per-op, eager";
    for (const auto &pg : cast(state).graphs)
        if (pg.key == kStepKey) return !pg.exec ? "per-op, eager" : pg.pdl ? "per-op, graph+pdl" : "per-op, graph";
    return "eager";
}

}  // namespace cuda

std::unique_ptr<Backend> create_cuda_backend_ex(const ModelConfig &config, const ModelWeights &weights,
                                                int32_t device, const CudaBackendOptions &options) {
    return std::make_unique<cuda::CudaBackend>(config, weights, device, options);
}

std::unique_ptr<Backend> make_cuda_backend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                                           size_t arena_block_bytes) {
    log(SPECLA_LOG_DEBUG, "creating the CUDA backend on device ", device, " (kernels for ", cuda::kernel_architectures(),
        ")");
    CudaBackendOptions options;
    options.arena_block_bytes = arena_block_bytes;
    return create_cuda_backend_ex(config, weights, device, options);
}

}  // namespace specla
