// Plain decoding and prefill speed of the engine, with the memory-bandwidth ceiling measured in the
// same run.
//
//   bench_decode [--model DIR] [--repeats N] [--steps N] [--skip-1p3b] [--cpu-threads N] [--trace]
//                [--json FILE]
//
// With CUDA: device-to-device copy bandwidth (bytes read + written); the GDN-1.3B shape with random
// bf16 weights built in memory (hidden 2048, 24 layers, 8 heads x 256, expand_v 1, intermediate
// 5632, vocab 32000, untied, conv 4, gate): decoding ms/step and tokens/s at batch 1 (median of
// repeats, CUDA events around graph replays; also end-to-end through decode_and_sample with the
// host round trip), the fraction of the copy ceiling (bytes per step = weights read + 2 x recurrent
// state, over the step time), prefill tokens/s at 512 and 4096 tokens; cuBLAS vs the custom bf16
// GEMV per projection shape; the same decode/prefill figures for the model in --model
// (gdn-pycode-22m by default). Without CUDA it reports the CPU backend on --model.
// A compact table is printed last; --json FILE writes the same rows machine-readably
// (bench_json.h). --trace prints the kernel-per-op step's timeline instead, in a build configured
// with -DSPECLA_KERNEL_TRACE=ON (without it the kernels have no trace slots and --trace says so).
// The persistent decoding step is an experiment (bench/experiments/persistent_step).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "bench_json.h"
#include "engine/backend.h"
#include "model/checkpoint.h"
#include "model/weights.h"
#include "util/error.h"

#ifdef SPECLA_WITH_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "backend/cuda/cuda_backend.h"
#include "cuda_probe.h"
#include "gdn_recurrent.cuh"
#include "gemv.cuh"
#include "gemv_multi.cuh"
#ifdef SPECLA_KERNEL_TRACE
#include "op_timeline.h"
#endif
#endif

using namespace specla;

namespace {

struct Row {
    std::string what, value, note;
};
std::vector<Row> g_table;
bench::JsonReport *g_json = nullptr;

// Whether the kernels have trace slots (CMake option SPECLA_KERNEL_TRACE).
#if defined(SPECLA_WITH_CUDA) && defined(SPECLA_KERNEL_TRACE)
constexpr bool kTraceBuilt = true;
#else
constexpr bool kTraceBuilt = false;
#endif

// The unit of a row, from how its name ends (the table spells it there).
std::string unit_of(const std::string &what) {
    const char *const units[][2] = {{" ms/step (events)", "ms"}, {" ms/step", "ms"}, {" tokens/s (events)", "tokens/s"},
                                    {" tokens/s end-to-end", "tokens/s"}, {" tokens/s", "tokens/s"},
                                    {" fraction of copy ceiling", "fraction"}, {" GB/s", "GB/s"}, {" us", "us"},
                                    {" MiB", "MiB"}};
    for (const auto &u : units) {
        const std::string suffix = u[0];
        if (what.size() >= suffix.size() && what.compare(what.size() - suffix.size(), suffix.size(), suffix) == 0)
            return u[1];
    }
    return "";
}

void add_row(const std::string &what, const char *fmt, double v, const std::string &note = "") {
    char buf[64];
    std::snprintf(buf, sizeof(buf), fmt, v);
    g_table.push_back({what, buf, note});
    if (g_json) g_json->add(what, v, unit_of(what), note);
    std::printf("  %-58s %14s  %s\n", what.c_str(), buf, note.c_str());
    std::fflush(stdout);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Args {
    std::string model = std::string(SPECLA_MODELS_DIR) + "/gdn-pycode-22m";
    int repeats = 7;
    int steps = 128;
    bool skip_big = false;
    int cpu_threads = 0;
    bool trace = false;  // the kernel-per-op step's timeline (diagnostics; SPECLA_KERNEL_TRACE builds)
};

Args parse(int argc, char **argv) {
    Args a;
    for (int i = 1; i < argc; ++i) {
        const std::string s = argv[i];
        auto next = [&]() -> std::string {
            if (i + 1 >= argc) fail(SPECLA_ERR_INVALID_ARGUMENT, s, " needs a value");
            return argv[++i];
        };
        if (s == "--model") a.model = next();
        else if (s == "--repeats") a.repeats = std::max(1, std::stoi(next()));
        else if (s == "--steps") a.steps = std::max(1, std::stoi(next()));
        else if (s == "--skip-1p3b") a.skip_big = true;
        else if (s == "--trace") a.trace = true;
        else if (s == "--cpu-threads") a.cpu_threads = std::stoi(next());
        else if (s == "--json") next();  // read by bench::JsonReport
        else if (s == "--help" || s == "-h") {
            std::printf("usage: bench_decode [--model DIR] [--repeats N] [--steps N] [--skip-1p3b] [--cpu-threads N] [--trace]\n"
                        "                    [--json FILE]\n");
            std::exit(0);
        } else {
            fail(SPECLA_ERR_INVALID_ARGUMENT, "unknown argument ", s);
        }
    }
    return a;
}

ModelConfig gdn_1p3b() {
    ModelConfig c;
    c.vocab_size = 32000, c.hidden_size = 2048, c.num_layers = 24, c.num_heads = 8, c.num_v_heads = 8;
    c.head_k_dim = 256, c.head_v_dim = 256, c.conv_size = 4, c.intermediate_size = 5632, c.norm_eps = 1e-6f;
    c.use_gate = true, c.use_short_conv = true, c.allow_neg_eigval = false, c.tie_word_embeddings = false;
    c.bos_token_id = 1, c.eos_token_id = 2;
    return c;
}

// Bytes a decoding step must read: every projection matrix once, the output matrix, and the
// recurrent state read + written (the conv cache and activations are negligible).
double step_bytes(const ModelConfig &c, const ModelWeights &w) {
    double b = double(w.output().rows * w.output().cols) * 2;
    for (const auto &L : w.layers)
        b += double(L.in_proj.rows * L.in_proj.cols + L.o_proj.rows * L.o_proj.cols + L.gate_up.rows * L.gate_up.cols +
                    L.down.rows * L.down.cols) * 2;
    b += 2.0 * double(c.num_layers) * double(c.recurrent_state_floats_per_layer()) * 4;
    return b;
}

std::vector<int32_t> tokens(int n, int vocab, uint32_t seed) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        t[static_cast<size_t>(i)] = int32_t(seed % uint32_t(vocab));
    }
    return t;
}

// Prefill of n tokens from a reset state, wall clock (eval_chain synchronises), median.
double prefill_ms(Backend &b, SequenceState &s, int n, int repeats) {
    const auto toks = tokens(n, b.config().vocab_size, 7);
    std::vector<float> logits(size_t(b.config().vocab_size));
    std::vector<double> t;
    for (int r = 0; r < repeats + 1; ++r) {
        b.reset_state(s);
        const double t0 = now_ms();
        b.eval_chain(s, toks.data(), n, LogitsRows::Last, logits.data());
        const double t1 = now_ms();
        if (r > 0) t.push_back(t1 - t0);  // the first run warms up (cuBLAS heuristics, caches)
    }
    return median(t);
}

// Plain decoding end to end: decode_and_sample (greedy), token fed back, host round trip included.
double decode_wall_ms_per_step(Backend &b, SequenceState &s, int steps, int repeats) {
    SamplingConfig greedy;
    std::vector<double> t;
    int32_t tok = 1;
    for (int r = 0; r < repeats; ++r) {
        const double t0 = now_ms();
        for (int i = 0; i < steps; ++i) tok = b.decode_and_sample(s, tok, greedy, 0.0, nullptr);
        t.push_back((now_ms() - t0) / steps);
    }
    return median(t);
}

void bench_cpu(const Args &a) {
    std::printf("\n== CPU backend: %s\n", a.model.c_str());
    auto ck = Checkpoint::open(a.model);
    const ModelConfig c = ck->config();
    ModelWeights w = load_weights(*ck, nullptr);
    auto b = create_cpu_backend(c, std::move(w), a.cpu_threads);
    SessionLimits lim;
    lim.max_batch_tokens = 512;
    auto s = b->create_state(lim);
    const double ms = decode_wall_ms_per_step(*b, *s, std::min(a.steps, 64), std::min(a.repeats, 3));
    add_row("cpu " + std::string("model") + " decode ms/step", "%.3f", ms);
    add_row("cpu model decode tokens/s", "%.1f", 1000.0 / ms);
    add_row("cpu model prefill 512 tokens/s", "%.1f", 512.0 / (prefill_ms(*b, *s, 512, 1) / 1000.0));
}

#ifdef SPECLA_WITH_CUDA

void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fail(SPECLA_ERR_DEVICE, what, ": ", cudaGetErrorString(e));
}
void ckb(cublasStatus_t s, const char *what) {
    if (s != CUBLAS_STATUS_SUCCESS) fail(SPECLA_ERR_DEVICE, what, ": cuBLAS status ", int(s));
}

bool gpu_present(std::string &why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        why = e != cudaSuccess ? cudaGetErrorString(e) : "no GPU";
        return false;
    }
    return true;
}

// Device-to-device copy of 2 GiB, counting bytes read + written.
double copy_ceiling_gbs(int repeats) {
    const size_t bytes = size_t(2) << 30;
    void *a = nullptr, *b = nullptr;
    ck(cudaMalloc(&a, bytes), "cudaMalloc");
    ck(cudaMalloc(&b, bytes), "cudaMalloc");
    ck(cudaMemset(a, 1, bytes), "cudaMemset");
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event");
    ck(cudaEventCreate(&e1), "event");
    std::vector<double> t;
    for (int r = 0; r < repeats + 2; ++r) {
        ck(cudaEventRecord(e0), "record");
        ck(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice), "copy");
        ck(cudaEventRecord(e1), "record");
        ck(cudaEventSynchronize(e1), "sync");
        float ms = 0;
        ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
        if (r >= 2) t.push_back(ms);
    }
    cudaFree(a), cudaFree(b);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return 2.0 * double(bytes) / (median(t) * 1e-3) / 1e9;
}

struct DecodeResult {
    double ms_step = 0, wall_ms = 0;
};

DecodeResult decode_timing(cuda::CudaBackend &b, int steps, int repeats) {
    SessionLimits lim;
    lim.max_batch_tokens = 64;
    auto s = b.create_state(lim);
    const auto warm = tokens(16, b.config().vocab_size, 3);
    std::vector<float> logits(size_t(b.config().vocab_size));
    b.eval_chain(*s, warm.data(), 16, LogitsRows::Last, logits.data());
    cuda::CudaBackendProbe::time_decode_steps(b, *s, 5, 8);  // warm-up: eager step, capture, a few replays
    std::vector<double> t;
    for (int r = 0; r < repeats; ++r) t.push_back(cuda::CudaBackendProbe::time_decode_steps(b, *s, 5, steps) / steps);
    DecodeResult d;
    d.ms_step = median(t);
    d.wall_ms = decode_wall_ms_per_step(b, *s, steps, std::min(repeats, 3));
    std::printf("  (decoding step mode: %s)\n", b.decode_mode(*s).c_str());
    return d;
}

void report_model(const std::string &tag, cuda::CudaBackend &b, const ModelWeights &w, double ceiling_gbs, int steps,
                  int repeats, bool big) {
    const ModelConfig &c = b.config();
    const double bytes = step_bytes(c, w);
    std::printf("\n== %s: %.1f MB read per decoding step (weights + 2 x state)\n", tag.c_str(), bytes / 1e6);
    CudaBackendOptions base = b.options();
    struct Variant {
        const char *name;
        bool graph, pdl;
    };
    const Variant variants[] = {{"kernel per op, graph+pdl", true, true},
                                {"kernel per op, graph", true, false},
                                {"kernel per op, eager", false, false}};
    for (const Variant &v : variants) {
        CudaBackendOptions o = base;
        o.use_graph = v.graph, o.use_pdl = v.pdl;
        cuda::CudaBackendProbe::set_options(b, o);
        const DecodeResult d = decode_timing(b, steps, repeats);
        const double gbs = bytes / (d.ms_step * 1e-3) / 1e9;
        const std::string p = tag + " decode [" + v.name + "]";
        add_row(p + " ms/step (events)", "%.4f", d.ms_step);
        add_row(p + " tokens/s (events)", "%.1f", 1000.0 / d.ms_step);
        add_row(p + " fraction of copy ceiling", "%.3f", gbs / ceiling_gbs, std::to_string(int(gbs)) + " GB/s");
        add_row(p + " tokens/s end-to-end", "%.1f", 1000.0 / d.wall_ms, "decode_and_sample, host round trip");
    }
    cuda::CudaBackendProbe::set_options(b, base);
    SessionLimits lim;
    lim.max_batch_tokens = 4096;
    for (int chunked = 1; chunked >= 0; --chunked) {
        CudaBackendOptions o = base;
        o.chunk_min_tokens = chunked ? 64 : (1 << 30);
        cuda::CudaBackendProbe::set_options(b, o);
        auto s = b.create_state(lim);
        const char *form = chunked ? "chunk/WY" : "recurrent";
        for (int n : {512, 4096}) {
            if (!chunked && n > 512 && big) continue;  // the token loop at 4096 is slow and not the product path
            const double ms = prefill_ms(b, *s, n, std::max(1, std::min(repeats, 3)));
            add_row(tag + " prefill " + std::to_string(n) + " [" + form + "] tokens/s", "%.0f", n / (ms * 1e-3),
                    std::to_string(ms).substr(0, 7) + " ms");
        }
    }
    cuda::CudaBackendProbe::set_options(b, base);
}

// cuBLAS (bf16 x, N = 1) vs the custom GEMV (fp32 x in registers) per projection shape, rotating over
// the layers so that the weights come from memory, not L2.
void bench_gemv(cuda::CudaBackend &b, double ceiling_gbs, int repeats) {
    const ModelConfig &c = b.config();
    const auto &dw = b.device_weights();
    const int64_t D = c.hidden_size, I = c.intermediate_size, VD = c.value_dim();
    const InProjLayout lay(c);
    struct Shape {
        const char *name;
        int64_t rows, cols;
        std::function<const uint16_t *(int)> w;
    };
    const std::vector<Shape> shapes = {
        {"in_proj", lay.rows, D, [&](int l) { return dw.layers[static_cast<size_t>(l)].in_proj; }},
        {"o_proj", D, VD, [&](int l) { return dw.layers[static_cast<size_t>(l)].o_proj; }},
        {"gate_up", 2 * I, D, [&](int l) { return dw.layers[static_cast<size_t>(l)].gate_up; }},
        {"down", D, I, [&](int l) { return dw.layers[static_cast<size_t>(l)].down; }},
        {"lm_head", c.vocab_size, D, [&](int) { return dw.lm_head; }},
    };
    const int64_t maxc = std::max(std::max(D, I), VD), maxr = std::max<int64_t>(lay.rows, std::max<int64_t>(2 * I, c.vocab_size));
    constexpr int kMaxRows = 16;  // token rows of the multi-row GEMV (a verification pass's nodes)
    float *x = nullptr, *y = nullptr;
    uint16_t *xb = nullptr;
    ck(cudaMalloc(reinterpret_cast<void **>(&x), static_cast<size_t>(maxc) * 4 * kMaxRows), "malloc");
    ck(cudaMalloc(reinterpret_cast<void **>(&xb), static_cast<size_t>(maxc) * 2), "malloc");
    ck(cudaMalloc(reinterpret_cast<void **>(&y), static_cast<size_t>(maxr) * 4 * kMaxRows), "malloc");
    std::vector<float> hx(static_cast<size_t>(maxc) * kMaxRows);
    for (size_t i = 0; i < hx.size(); ++i) hx[i] = std::sin(float(i) * 0.37f);
    std::vector<uint16_t> hxb(hx.size());
    for (size_t i = 0; i < hx.size(); ++i) hxb[i] = f32_to_bf16(hx[i]);
    ck(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice), "copy");
    ck(cudaMemcpy(xb, hxb.data(), size_t(maxc) * 2, cudaMemcpyHostToDevice), "copy");
    cudaStream_t st;
    ck(cudaStreamCreate(&st), "stream");
    cublasHandle_t h;
    ckb(cublasCreate(&h), "cublasCreate");
    ckb(cublasSetStream(h, st), "cublasSetStream");
    cudaEvent_t e0, e1;
    ck(cudaEventCreate(&e0), "event");
    ck(cudaEventCreate(&e1), "event");
    const int L = c.num_layers;
    // Milliseconds per call of `call(l)` over the L layers' weights (rotating, so the weights are not
    // served from L2), CUDA events around each sweep, median of `repeats` sweeps after a warm-up.
    auto time_calls = [&](const std::function<void(int)> &call) {
        for (int l = 0; l < L; ++l) call(l);
        std::vector<double> t;
        for (int r = 0; r < repeats; ++r) {
            ck(cudaEventRecord(e0, st), "record");
            for (int l = 0; l < L; ++l) call(l);
            ck(cudaEventRecord(e1, st), "record");
            ck(cudaEventSynchronize(e1), "sync");
            float ms = 0;
            ck(cudaEventElapsedTime(&ms, e0, e1), "elapsed");
            t.push_back(ms / L);
        }
        return median(t);
    };
    std::printf("\n== GEMV, one token (bf16 weights, fp32 accumulate), per call, median of %d x %d calls\n", repeats, L);
    for (const Shape &s : shapes) {
        const double bytes = double(s.rows * s.cols) * 2;
        const float one = 1.f, zero = 0.f;
        const double t_cublas = time_calls([&](int l) {
            ckb(cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, int(s.rows), 1, int(s.cols), &one, s.w(l), CUDA_R_16BF,
                             int(s.cols), xb, CUDA_R_16BF, int(s.cols), &zero, y, CUDA_R_32F, int(s.rows),
                             CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                "cublasGemmEx");
        });
        kern::LaunchCtx ctx = b.launch_ctx(st);
        ctx.pdl = false;
        auto custom = [&](int per_sm, bool pdl) {
            kern::LaunchCtx c2 = ctx;
            c2.pdl = pdl;
            return time_calls([&](int l) {
                kern::GemvParams p;
                p.w = s.w(l), p.rows = s.rows, p.cols = s.cols, p.x = x, p.out = y, p.ctas_per_sm = per_sm;
                ck(kern::launch_gemv(p, c2), "launch_gemv");
            });
        };
        const double t_custom = custom(0, false);
        const double t_pdl = custom(0, true);
        // The same matrix every call: served from L2 where it fits (60 MB on the H200), which bounds what
        // staging a matrix in L2 ahead of its kernel could gain.
        kern::LaunchCtx c_l2 = ctx;
        c_l2.pdl = true;
        const double t_l2 = time_calls([&](int) {
            kern::GemvParams p;
            p.w = s.w(0), p.rows = s.rows, p.cols = s.cols, p.x = x, p.out = y;
            ck(kern::launch_gemv(p, c_l2), "launch_gemv");
        });
        double best_t = t_custom;
        int best_k = 0;
        for (int k : {1, 2, 3}) {
            const double tk = custom(k, false);
            if (tk < best_t) best_t = tk, best_k = k;
        }
        const std::string n = std::string("gemv ") + s.name + " " + std::to_string(s.rows) + "x" + std::to_string(s.cols);
        add_row(n + " cuBLAS us", "%.2f", t_cublas * 1e3,
                std::to_string(int(bytes / (t_cublas * 1e-3) / 1e9)) + " GB/s, " +
                    std::to_string(int(100 * bytes / (t_cublas * 1e-3) / 1e9 / ceiling_gbs)) + "% of ceiling");
        add_row(n + " custom us", "%.2f", t_custom * 1e3,
                std::to_string(int(bytes / (t_custom * 1e-3) / 1e9)) + " GB/s, " +
                    std::to_string(int(100 * bytes / (t_custom * 1e-3) / 1e9 / ceiling_gbs)) + "% of ceiling; " +
                    (t_custom <= t_cublas ? "kept (faster)" : "cuBLAS faster") +
                    (best_k ? "; best grid " + std::to_string(best_k) + " CTA/SM: " + std::to_string(best_t * 1e3).substr(0, 6) + " us" : ""));
        add_row(n + " custom, back-to-back with PDL us", "%.2f", t_pdl * 1e3,
                std::to_string(int(bytes / (t_pdl * 1e-3) / 1e9)) + " GB/s");
        add_row(n + " custom, same weights back-to-back with PDL us", "%.2f", t_l2 * 1e3,
                std::to_string(int(bytes / (t_l2 * 1e-3) / 1e9)) + " GB/s (from L2 where the matrix fits)");
    }
    // The multi-row GEMV of a verification pass: n token rows in one launch, each row bitwise the
    // one-token GEMV's. Against the one-token time, and against the fp32 FMA floor (n x rows x cols
    // FMAs at 128 per SM and clock), since n rows reproduce n one-row FMA orders.
    int khz = 0;
    ck(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0), "clock rate");
    const double fma_per_s = double(b.sm_count()) * 128.0 * double(khz) * 1e3;
    std::printf("\n== GEMV, n token rows in one launch (verification), per call, median of %d x %d calls\n", repeats, L);
    for (const Shape &s : shapes) {
        kern::LaunchCtx ctx = b.launch_ctx(st);
        ctx.pdl = false;
        double t1 = 0;
        for (int n : {1, 4, 8, 16}) {
            const double t = time_calls([&](int l) {
                kern::GemvMultiParams mp;
                mp.g.w = s.w(l), mp.g.rows = s.rows, mp.g.cols = s.cols, mp.g.x = x, mp.g.out = y;
                mp.n = n, mp.x_ld = s.cols, mp.out_ld = s.rows;
                ck(kern::launch_gemv_multi(mp, ctx), "launch_gemv_multi");
            });
            if (n == 1) t1 = t;
            const double floor_us = double(n) * double(s.rows) * double(s.cols) / fma_per_s * 1e6;
            char note[96];
            std::snprintf(note, sizeof note, "%.2fx one row; fp32 FMA floor %.2f us", t / t1, floor_us);
            add_row(std::string("gemv ") + s.name + " multi-row n=" + std::to_string(n) + " us", "%.2f", t * 1e3, note);
        }
    }
    {  // The recurrent step alone (one token, all value heads of a layer), rotating over the layers.
        const int64_t R = lay.rows, per_layer = c.recurrent_state_floats_per_layer();
        float *proj = nullptr, *state = nullptr, *o = nullptr;
        ck(cudaMalloc(reinterpret_cast<void **>(&proj), size_t(R) * 4), "malloc");
        ck(cudaMalloc(reinterpret_cast<void **>(&state), size_t(L * per_layer) * 4), "malloc");
        ck(cudaMalloc(reinterpret_cast<void **>(&o), size_t(VD) * 4), "malloc");
        std::vector<float> hp(static_cast<size_t>(R));
        for (size_t i = 0; i < hp.size(); ++i) hp[i] = 0.1f * std::cos(float(i) * 0.11f);
        for (int64_t hv = 0; hv < c.num_v_heads; ++hv) hp[size_t(lay.a + hv)] = -0.1f, hp[size_t(lay.b + hv)] = 0.5f;
        ck(cudaMemcpy(proj, hp.data(), hp.size() * 4, cudaMemcpyHostToDevice), "copy");
        ck(cudaMemset(state, 0, size_t(L * per_layer) * 4), "memset");
        auto run = [&](bool pdl) {
            kern::LaunchCtx c2 = b.launch_ctx(st);
            c2.pdl = pdl;
            auto call = [&](int l) {
                kern::RecurrentParams rp;
                rp.n_tokens = 1, rp.H = c.num_heads, rp.HV = c.num_v_heads, rp.K = c.head_k_dim, rp.V = c.head_v_dim;
                rp.q = proj + lay.q, rp.k = proj + lay.k, rp.v = proj + lay.v, rp.g = proj + lay.a, rp.beta = proj + lay.b;
                rp.q_tstride = R, rp.q_hstride = c.head_k_dim, rp.v_tstride = R, rp.v_hstride = c.head_v_dim;
                rp.gb_tstride = R, rp.gb_hstride = 1, rp.state = state + l * per_layer;
                rp.o = o, rp.o_tstride = VD, rp.o_hstride = c.head_v_dim, rp.normalize = 1;
                rp.q_scale = 1.f / std::sqrt(float(c.head_k_dim));
                ck(kern::launch_gdn_recurrent(rp, c2), "launch_gdn_recurrent");
            };
            return time_calls(call);
        };
        const double t_rec = run(false), t_rec_pdl = run(true);
        const double sb = 2.0 * double(per_layer) * 4;
        add_row("recurrent step, one layer us", "%.2f", t_rec * 1e3,
                std::to_string(int(sb / (t_rec * 1e-3) / 1e9)) + " GB/s of state read+written");
        add_row("recurrent step, one layer, back-to-back with PDL us", "%.2f", t_rec_pdl * 1e3);
        cudaFree(proj), cudaFree(state), cudaFree(o);
    }
    cublasDestroy(h);
    cudaStreamDestroy(st);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaFree(x), cudaFree(xb), cudaFree(y);
}

#ifdef SPECLA_KERNEL_TRACE
// Where a kernel-per-op step (graph + PDL) spends its time: per kernel of
// a layer, when its first and last CTA enter, get past the grid-dependency wait, have the input
// vector, and exit, in us from the layer's first in_proj entry, averaged over the middle layers of
// `reps` steps (kern::kOpTraceSlots).
void trace_op_step(cuda::CudaBackend &b, int reps) {
    const ModelConfig &c = b.config();
    bench::OpTimeline tl(c.num_layers, 5);
    const size_t n = tl.words();
    const std::vector<unsigned long long> init = tl.initial();
    std::vector<unsigned long long> t(n);
    unsigned long long *d = nullptr;
    ck(cudaMalloc(reinterpret_cast<void **>(&d), n * 8), "malloc trace");
    const CudaBackendOptions base = b.options();
    CudaBackendOptions o = base;
    o.use_graph = true, o.use_pdl = true, o.decode_trace = d;
    cuda::CudaBackendProbe::set_options(b, o);
    {
        SessionLimits lim;
        lim.max_batch_tokens = 64;
        auto s = b.create_state(lim);
        const auto warm = tokens(16, c.vocab_size, 3);
        std::vector<float> logits(size_t(c.vocab_size));
        b.eval_chain(*s, warm.data(), 16, LogitsRows::Last, logits.data());
        cuda::CudaBackendProbe::time_decode_steps(b, *s, 5, 4);
        for (int r = 0; r < reps; ++r) {
            ck(cudaMemcpy(d, init.data(), n * 8, cudaMemcpyHostToDevice), "reset trace");
            cuda::CudaBackendProbe::time_decode_steps(b, *s, 5, 1);
            ck(cudaMemcpy(t.data(), d, n * 8, cudaMemcpyDeviceToHost), "copy trace");
            tl.add(t);
        }
    }
    cuda::CudaBackendProbe::set_options(b, base);
    cudaFree(d);
    const char *kernels[5] = {"in_proj", "recurrent", "o_proj", "gate_up", "down"};
    std::printf("\n");
    tl.print("== kernel-per-op step timeline", kernels, "lm_head");
}
#endif  // SPECLA_KERNEL_TRACE

void bench_cuda(const Args &a) {
    cudaDeviceProp prop{};
    ck(cudaGetDeviceProperties(&prop, 0), "properties");
    std::printf("device: %s, %d SMs, %.1f GiB\n", prop.name, prop.multiProcessorCount,
                double(prop.totalGlobalMem) / double(1 << 30));
    if (g_json) g_json->set_device(std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs");
    const double ceiling = copy_ceiling_gbs(a.repeats);
    add_row("device-to-device copy ceiling GB/s", "%.0f", ceiling, "bytes read + written, 2 GiB");

    if (!a.skip_big) {
        const ModelConfig c = gdn_1p3b();
        const double t0 = now_ms();
        ModelWeights w = random_weights(c, 1234, WeightType::BF16);
        std::printf("built GDN-1.3B random bf16 weights (%.0f M parameters) in %.1f s\n", double(c.num_parameters()) / 1e6,
                    (now_ms() - t0) / 1000);
        auto backend = create_cuda_backend_ex(c, w, 0, CudaBackendOptions{});
        auto &b = dynamic_cast<cuda::CudaBackend &>(*backend);
        if (a.trace) {
#ifdef SPECLA_KERNEL_TRACE
            trace_op_step(b, a.repeats);
#endif
            return;
        }
        report_model("1.3B", b, w, ceiling, a.steps, a.repeats, true);
        bench_gemv(b, ceiling, a.repeats);
        const MemoryStats m = b.memory_stats();
        add_row("1.3B device weight MiB", "%.0f", double(m.weight_bytes) / (1 << 20));
    }
    try {
        auto ckp = Checkpoint::open(a.model);
        const ModelConfig c = ckp->config();
        ModelWeights w = load_weights(*ckp, nullptr);
        auto backend = create_cuda_backend_ex(c, w, 0, CudaBackendOptions{});
        auto &b = dynamic_cast<cuda::CudaBackend &>(*backend);
        report_model("22m", b, w, ceiling, a.steps * 4, a.repeats, false);
    } catch (const Error &e) {
        std::printf("model %s skipped: %s\n", a.model.c_str(), e.what());
    }
}

#endif  // SPECLA_WITH_CUDA

}  // namespace

int main(int argc, char **argv) {
    bench::JsonReport json(argc, argv);
    g_json = &json;
    try {
        const Args a = parse(argc, argv);
        if (a.trace && !kTraceBuilt) {
            std::printf("bench_decode --trace: this build has no trace slots in its kernels; configure with "
                        "-DSPECLA_KERNEL_TRACE=ON (a separate build tree, so that the product's kernels stay "
                        "without them) and run it there\n");
            return 2;
        }
#ifdef SPECLA_WITH_CUDA
        std::string why;
        if (gpu_present(why)) {
            bench_cuda(a);
        } else {
            std::printf("CUDA is built in but no GPU is usable (%s): CPU backend only\n", why.c_str());
            bench_cpu(a);
        }
#else
        std::printf("this build has no CUDA support: CPU backend only\n");
        bench_cpu(a);
#endif
    } catch (const Error &e) {
        std::fprintf(stderr, "bench_decode: %s\n", e.what());
        return 1;
    }
    std::printf("\n%-60s %14s  %s\n", "measure", "value", "note");
    for (const Row &r : g_table) std::printf("%-60s %14s  %s\n", r.what.c_str(), r.value.c_str(), r.note.c_str());
    return json.write() ? 0 : 1;
}
