// What a multi-row GEMV launch costs by row count and prologue, standalone, on the product's
// kernels (kernels/gemv.cu, kernels/gemv_multi.cu): per projection of a shape, microseconds per
// launch (CUDA events over back-to-back launches) of the one-row GEMV and of the multi-row GEMV at
// n = 1..32 rows, and the same multi-row launch with the prologue switched off, so that a
// prologue's share of a latency-bound launch shows as a difference.
//
//   bench_gemv_latency [--shape pycode|gdn-1.3b] [--reps N]
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "gemv.cuh"
#include "gemv_multi.cuh"

using namespace specla::kern;

namespace {

void ok(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

struct Proj {
    const char *name;
    int64_t rows, cols;
    GemvPrologue pro;
    GemvEpilogue epi;
    int head_dim;
};

template <class F>
float per_launch_us(int reps, F launch) {
    cudaEvent_t a, b;
    ok(cudaEventCreate(&a), "event");
    ok(cudaEventCreate(&b), "event");
    for (int i = 0; i < 20; ++i) launch();
    ok(cudaEventRecord(a), "record");
    for (int i = 0; i < reps; ++i) launch();
    ok(cudaEventRecord(b), "record");
    ok(cudaEventSynchronize(b), "sync");
    float ms = 0;
    ok(cudaEventElapsedTime(&ms, a, b), "elapsed");
    ok(cudaGetLastError(), "launch");
    cudaEventDestroy(a), cudaEventDestroy(b);
    return 1e3f * ms / float(reps);
}

}  // namespace

int main(int argc, char **argv) {
    std::string shape = "pycode";
    int reps = 500;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--shape") && i + 1 < argc) shape = argv[++i];
        else if (!std::strcmp(argv[i], "--reps") && i + 1 < argc) reps = std::atoi(argv[++i]);
        else {
            std::fprintf(stderr, "usage: %s [--shape pycode|gdn-1.3b] [--reps N]\n", argv[0]);
            return 2;
        }
    }
    // in_proj rows: q, k (H*K each), v, z (HV*V each), a, b (HV each).
    int64_t D, KD, VD, HV, I, vocab, V;
    if (shape == "gdn-1.3b") D = 2048, KD = 2048, VD = 2048, HV = 8, I = 5632, vocab = 32000, V = 256;
    else D = 384, KD = 256, VD = 512, HV = 2, I = 1024, vocab = 8192, V = 256;
    const int64_t R = 2 * KD + 2 * VD + 2 * HV;
    const std::vector<Proj> projs = {
        {"in_proj", R, D, GemvPrologue::RmsNorm, GemvEpilogue::Store, 0},
        {"o_proj", D, VD, GemvPrologue::HeadNorm, GemvEpilogue::Add, int(V)},
        {"gate_up", 2 * I, D, GemvPrologue::RmsNorm, GemvEpilogue::SwiGLU, 0},
        {"down", D, I, GemvPrologue::None, GemvEpilogue::Add, 0},
        {"lm_head", vocab, D, GemvPrologue::RmsNorm, GemvEpilogue::Logits, 0},
    };
    int dev = 0, sms = 0;
    ok(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "attr");
    const int nmax = 32;
    int64_t maxw = 0, maxx = 0;
    for (const Proj &p : projs) maxw = std::max(maxw, p.rows * p.cols), maxx = std::max(maxx, std::max(p.rows, p.cols));
    uint16_t *w;
    float *x, *z, *out, *nw;
    unsigned long long *am;
    ok(cudaMalloc(&w, size_t(maxw) * 2), "malloc");
    ok(cudaMalloc(&x, size_t(nmax) * size_t(maxx) * 4), "malloc");
    ok(cudaMalloc(&z, size_t(nmax) * size_t(R) * 4), "malloc");
    ok(cudaMalloc(&out, size_t(nmax) * size_t(maxx) * 4), "malloc");
    ok(cudaMalloc(&nw, size_t(maxx) * 4), "malloc");
    ok(cudaMalloc(&am, nmax * 8), "malloc");
    // Small values: bf16 0x3c00-ish patterns, x and z 0.01.
    ok(cudaMemset(w, 0x3c, size_t(maxw) * 2), "memset");
    std::vector<float> h(size_t(nmax) * size_t(std::max(maxx, R)), 0.01f);
    ok(cudaMemcpy(x, h.data(), size_t(nmax) * size_t(maxx) * 4, cudaMemcpyHostToDevice), "copy");
    ok(cudaMemcpy(z, h.data(), size_t(nmax) * size_t(R) * 4, cudaMemcpyHostToDevice), "copy");
    ok(cudaMemcpy(nw, h.data(), size_t(maxx) * 4, cudaMemcpyHostToDevice), "copy");
    ok(cudaMemset(am, 0, nmax * 8), "memset");

    std::printf("shape %s, %d SMs, us per launch (%d back-to-back launches)\n", shape.c_str(), sms, reps);
    std::printf("| projection | pdl | one-row GEMV | multi n=1 | 2 | 4 | 8 | 16 | 32 | multi n=16, no prologue |\n");
    std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
    for (const Proj &pr : projs) {
        for (int pdl = 0; pdl < 2; ++pdl) {
            LaunchCtx ctx;
            ctx.pdl = pdl == 1, ctx.sm_count = sms;
            GemvParams g;
            g.w = w, g.rows = pr.rows, g.cols = pr.cols, g.pro = pr.pro, g.x = x, g.norm_w = nw, g.z = z;
            g.head_dim = pr.head_dim, g.use_gate = pr.pro == GemvPrologue::HeadNorm ? 1 : 0;
            g.epi = pr.epi, g.out = out, g.argmax = am;
            std::printf("| %s | %s | %.2f |", pr.name, pdl ? "on" : "off",
                        per_launch_us(reps, [&] { ok(launch_gemv(g, ctx), "gemv"); }));
            for (int n : {1, 2, 4, 8, 16, 32}) {
                GemvMultiParams m;
                m.g = g, m.n = n, m.x_ld = pr.cols, m.z_ld = R, m.out_ld = pr.rows;
                std::printf(" %.2f |", per_launch_us(reps, [&] { ok(launch_gemv_multi(m, ctx), "multi"); }));
            }
            GemvMultiParams m;
            m.g = g, m.g.pro = GemvPrologue::None, m.n = 16, m.x_ld = pr.cols, m.z_ld = R, m.out_ld = pr.rows;
            std::printf(" %.2f |\n", per_launch_us(reps, [&] { ok(launch_gemv_multi(m, ctx), "multi"); }));
        }
    }
    return 0;
}
