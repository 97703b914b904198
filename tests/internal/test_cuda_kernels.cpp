// Every CUDA kernel against its CPU reference (backend/cpu/cpu_ops.h, cpu_gdn.h, the host sampler,
// or a small double-precision reference written here) on fresh random inputs; the seed is printed.
//
// Tolerances (max |gpu - ref| / max |ref|):
//   fp32 kernels on the same inputs (GEMV with bf16 weights vs a double reference over the same bf16
//   values, recurrent step, conv/gates): 1e-4 -- only the summation order differs;
//   kernels writing bf16 (norm rows, SwiGLU rows): 8e-3 -- one bf16 rounding (2^-9 relative);
//   the chunk (WY) state pass on TF32 tensor cores vs the exact token loop: 1e-2 -- TF32 keeps 10
//   mantissa bits (~5e-4 per product) and errors add over a chunk;
//   token selection (argmax, top-k/top-p sampling, the fixed-width drafting beam step): exact.
#include "test_cuda_common.h"

#ifndef SPECLA_WITH_CUDA

TEST_CASE("cuda kernels: skipped") { MESSAGE("CUDA kernel tests skipped: this build has no CUDA support"); }

#else

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_gdn.h"
#include "beam_draft.cuh"
#include "backend/cpu/cpu_ops.h"
#include "conv.cuh"
#include "embedding.cuh"
#include "engine/fixed_width_draft.h"
#include "gdn_chunk.cuh"
#include "gdn_recurrent.cuh"
#include "gemv.cuh"
#include "gemv_multi.cuh"
#include "sampling/logprobs.h"
#include "sampling/sampler.h"
#include "model/safetensors.h"
#include "norms.cuh"
#include "sampling.cuh"
#include "swiglu.cuh"
#include "top_tokens.cuh"

using namespace specla;
using namespace cudatest;

namespace {

struct Rand {
    std::mt19937_64 g;
    explicit Rand(uint64_t s) : g(s) {}
    float normal(float s = 1.f) { return std::normal_distribution<float>(0.f, s)(g); }
    float uni(float a, float b) { return std::uniform_real_distribution<float>(a, b)(g); }
    int integer(int a, int b) { return std::uniform_int_distribution<int>(a, b)(g); }
    std::vector<float> normals(size_t n, float s = 1.f) {
        std::vector<float> v(n);
        for (auto &x : v) x = normal(s);
        return v;
    }
    std::vector<float> unis(size_t n, float a, float b) {
        std::vector<float> v(n);
        for (auto &x : v) x = uni(a, b);
        return v;
    }
};

kern::LaunchCtx test_ctx() {
    kern::LaunchCtx ctx;
    int dev = 0;
    cudaDeviceProp p{};
    CK(cudaGetDevice(&dev));
    CK(cudaGetDeviceProperties(&p, dev));
    ctx.sm_count = p.multiProcessorCount;
    ctx.pdl = false;
    return ctx;
}

std::vector<uint16_t> to_bf16(const std::vector<float> &v) {
    std::vector<uint16_t> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = f32_to_bf16(v[i]);
    return r;
}

// ---- GEMV ------------------------------------------------------------------------------------------------

struct GemvCase {
    int64_t rows, cols;
    kern::GemvPrologue pro;
    kern::GemvEpilogue epi;
    int head_dim = 0;
    bool gate = false;
    bool generic = false;
};

void run_gemv_case(Rand &rnd, const GemvCase &gc, const kern::LaunchCtx &ctx) {
    INFO("gemv rows=", gc.rows, " cols=", gc.cols, " pro=", int(gc.pro), " epi=", int(gc.epi), " hd=", gc.head_dim,
         " generic=", gc.generic);
    const int64_t R = gc.rows, Cn = gc.cols;
    const float eps = 1e-5f;
    std::vector<float> wf = rnd.normals(size_t(R * Cn), 1.f / std::sqrt(float(Cn)));
    const std::vector<uint16_t> wb = to_bf16(wf);
    const std::vector<float> x = rnd.normals(static_cast<size_t>(Cn), 1.5f);
    const int nw = gc.pro == kern::GemvPrologue::HeadNorm ? gc.head_dim : int(Cn);
    const std::vector<float> nwv = rnd.unis(static_cast<size_t>(nw), 0.6f, 1.4f);
    const std::vector<float> z = rnd.normals(static_cast<size_t>(Cn));

    // Reference input vector.
    std::vector<float> xp(static_cast<size_t>(Cn));
    if (gc.pro == kern::GemvPrologue::None) xp = x;
    else if (gc.pro == kern::GemvPrologue::RmsNorm) cpu::rmsnorm(x.data(), nwv.data(), Cn, eps, xp.data());
    else
        for (int64_t h = 0; h < Cn / gc.head_dim; ++h)
            cpu::gated_rmsnorm(x.data() + h * gc.head_dim, nwv.data(), gc.gate ? z.data() + h * gc.head_dim : nullptr,
                               gc.head_dim, eps, xp.data() + h * gc.head_dim);
    std::vector<double> y(static_cast<size_t>(R));
    for (int64_t r = 0; r < R; ++r) {
        double acc = 0;
        for (int64_t c = 0; c < Cn; ++c) acc += double(bf16_to_f32(wb[size_t(r * Cn + c)])) * xp[static_cast<size_t>(c)];
        y[static_cast<size_t>(r)] = acc;
    }

    const bool paired = gc.epi == kern::GemvEpilogue::SwiGLU;
    const int64_t nout = paired ? R / 2 : R;
    std::vector<float> out0 = rnd.normals(static_cast<size_t>(nout));
    std::vector<float> want(static_cast<size_t>(nout));
    for (int64_t r = 0; r < nout; ++r) {
        switch (gc.epi) {
            case kern::GemvEpilogue::Add: want[static_cast<size_t>(r)] = float(out0[static_cast<size_t>(r)] + y[static_cast<size_t>(r)]); break;
            case kern::GemvEpilogue::SwiGLU:
                want[static_cast<size_t>(r)] = float(cpu::silu(float(y[static_cast<size_t>(r)])) * y[size_t(nout + r)]);
                break;
            default: want[static_cast<size_t>(r)] = float(y[static_cast<size_t>(r)]);
        }
    }

    DevBuf<uint16_t> dw(wb);
    // Half the gated cases get z already through silu (use_gate = 2, as the decoding step's in_proj
    // leaves it): the same reference. And half of them place z one float past a 16-byte boundary,
    // as in_proj's output does when 2 H K is not a multiple of 4 (the prologue's scalar loads).
    std::vector<float> zs(z.size());
    for (size_t i = 0; i < z.size(); ++i) zs[i] = cpu::silu(z[i]);
    const int use_gate = gc.gate && rnd.integer(0, 1) ? 2 : int(gc.gate);
    const int z_off = rnd.integer(0, 1);
    std::vector<float> zdev(z.size() + 1, 0.f);
    std::copy(use_gate == 2 ? zs.begin() : z.begin(), use_gate == 2 ? zs.end() : z.end(), zdev.begin() + z_off);
    INFO("use_gate=", use_gate, " z offset=", z_off);
    DevBuf<float> dx(x), dn(nwv), dz(zdev), dout(out0);
    DevBuf<unsigned long long> dam(1);
    CK(cudaMemset(dam.p, 0, 8));
    if (gc.epi != kern::GemvEpilogue::Add) dout.poison();
    kern::GemvParams p;
    p.w = dw.p, p.rows = R, p.cols = Cn;
    p.pro = gc.pro, p.x = dx.p, p.norm_w = dn.p, p.eps = eps, p.z = gc.gate ? dz.p + z_off : nullptr;
    p.head_dim = gc.head_dim, p.use_gate = use_gate;
    p.epi = gc.epi, p.out = dout.p, p.argmax = dam.p;
    p.force_generic = gc.generic;
    CK(kern::launch_gemv(p, ctx));
    CK(cudaDeviceSynchronize());
    const std::vector<float> got = dout.download();
    const double err = max_rel(got, want);
    CHECK(err <= 1e-4);
    if (gc.epi == kern::GemvEpilogue::Logits) {
        const int32_t id = kern::argmax_key_id(dam.download()[0]);
        REQUIRE(id >= 0);
        REQUIRE(id < R);
        // The same row as the host argmax of the kernel's own output (exact rule, ties -> lowest id).
        CHECK(id == specla::argmax(got.data(), int32_t(R)));
    }
}

TEST_CASE("cuda kernels: bf16 GEMV with fused prologues and epilogues vs CPU reference") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("gemv"));
    const auto ctx = test_ctx();
    using P = kern::GemvPrologue;
    using E = kern::GemvEpilogue;
    const GemvCase cases[] = {
        {37, 64, P::RmsNorm, E::Store},
        {1000, 2048, P::RmsNorm, E::Add},
        {600, 2048, P::RmsNorm, E::SwiGLU},
        {2048, 2048, P::HeadNorm, E::Add, 256, true},
        {400, 512, P::HeadNorm, E::Store, 128, false},
        {513, 5632, P::None, E::Add},
        {100, 9000, P::None, E::Store},
        {50, 100, P::RmsNorm, E::Store},          // cols % 8 != 0: generic kernel
        {64, 144, P::HeadNorm, E::Store, 24, true},
        {70, 96, P::HeadNorm, E::Store, 12, true},  // head_dim % 8 != 0: generic kernel
        {3000, 384, P::RmsNorm, E::Logits},
        {514, 256, P::RmsNorm, E::SwiGLU, 0, false, true},
        {777, 256, P::RmsNorm, E::Logits, 0, false, true},
        {32000, 2048, P::RmsNorm, E::Logits},
    };
    for (const GemvCase &gc : cases) run_gemv_case(rnd, gc, ctx);
}

// The multi-row GEMV of speculative verification: every token row bitwise equal to the one-token
// GEMV on that row alone (the property that makes a verified node equal a decoding step), across
// the kernel's token-tile and chunk layouts and the per-row fallback.
void run_gemv_multi_case(Rand &rnd, const GemvCase &gc, int32_t n, const kern::LaunchCtx &ctx) {
    INFO("gemv multi rows=", gc.rows, " cols=", gc.cols, " pro=", int(gc.pro), " epi=", int(gc.epi),
         " hd=", gc.head_dim, " n=", n);
    const int64_t R = gc.rows, Cn = gc.cols;
    const bool paired = gc.epi == kern::GemvEpilogue::SwiGLU;
    const int64_t nout = paired ? R / 2 : R;
    // Rows of x and z one float apart beyond their width, and z from one float past a 16-byte
    // boundary, for odd and even row counts in turn (the cases list both for every gated shape):
    // the prologue's 16-byte loads where a row is aligned, scalar ones elsewhere, must give the
    // same values. The gate raw (use_gate 1) or already through silu (2).
    const int64_t x_ld = Cn + n % 2, z_ld = Cn + (n / 2) % 2;
    const int z_off = n % 2, use_gate = gc.gate ? 1 + n % 2 : 0;
    INFO("x_ld=", x_ld, " z_ld=", z_ld, " z offset=", z_off, " use_gate=", use_gate);
    DevBuf<uint16_t> dw(to_bf16(rnd.normals(size_t(R * Cn), 1.f / std::sqrt(float(Cn)))));
    DevBuf<float> dx(rnd.normals(size_t(n * x_ld), 1.5f));
    DevBuf<float> dn(rnd.unis(size_t(gc.pro == kern::GemvPrologue::HeadNorm ? gc.head_dim : Cn), 0.6f, 1.4f));
    DevBuf<float> dz(rnd.normals(size_t(n * z_ld + 1)));
    const std::vector<float> out0 = rnd.normals(size_t(n * nout));
    DevBuf<float> one(out0), multi(out0);
    DevBuf<unsigned long long> am_one{size_t(n)}, am_multi{size_t(n)};
    CK(cudaMemset(am_one.p, 0, size_t(n) * 8));
    CK(cudaMemset(am_multi.p, 0, size_t(n) * 8));
    kern::GemvParams p;
    p.w = dw.p, p.rows = R, p.cols = Cn, p.pro = gc.pro, p.norm_w = dn.p, p.eps = 1e-5f;
    p.head_dim = gc.head_dim, p.use_gate = use_gate, p.epi = gc.epi;
    for (int32_t t = 0; t < n; ++t) {
        kern::GemvParams q = p;
        q.x = dx.p + t * x_ld, q.z = gc.gate ? dz.p + z_off + t * z_ld : nullptr;
        q.out = one.p + t * nout, q.argmax = am_one.p + t;
        CK(kern::launch_gemv(q, ctx));
    }
    kern::GemvMultiParams mp;
    mp.g = p;
    mp.g.x = dx.p, mp.g.z = gc.gate ? dz.p + z_off : nullptr, mp.g.out = multi.p, mp.g.argmax = am_multi.p;
    mp.n = n, mp.x_ld = x_ld, mp.z_ld = z_ld, mp.out_ld = nout;
    CK(kern::launch_gemv_multi(mp, ctx));
    CK(cudaDeviceSynchronize());
    const auto a = one.download(), b = multi.download();
    CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
    if (gc.epi == kern::GemvEpilogue::Logits) CHECK(am_one.download() == am_multi.download());
}

TEST_CASE("cuda kernels: multi-row GEMV rows are bitwise the one-token GEMV's") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("gemv multi"));
    const auto ctx = test_ctx();
    using P = kern::GemvPrologue;
    using E = kern::GemvEpilogue;
    struct Case {
        GemvCase g;
        std::vector<int32_t> ns;
    };
    const Case cases[] = {
        {{600, 2048, P::RmsNorm, E::SwiGLU}, {1, 2, 3, 5, 8, 16, 19, 33, 64}},  // one chunk per thread: 1-8 tokens per tile
        {{2048, 2048, P::HeadNorm, E::Add, 256, true}, {7, 16}},  // a head per warp
        {{400, 512, P::HeadNorm, E::Store, 128, false}, {3, 8}},  // two heads per warp
        {{1000, 2048, P::RmsNorm, E::Store}, {4, 12}},
        {{513, 5632, P::None, E::Add}, {2, 4, 7, 16}},                  // two chunks per thread
        {{100, 9000, P::None, E::Store}, {3}},                           // four chunks per thread
        {{3000, 384, P::RmsNorm, E::Logits}, {1, 17, 64}},
        {{64, 144, P::HeadNorm, E::Store, 24, true}, {5, 6}},            // heads across lanes: ordered sums
        {{50, 100, P::RmsNorm, E::Store}, {4}},                          // cols % 8 != 0: one launch per row
    };
    for (const Case &c : cases)
        for (int32_t n : c.ns) run_gemv_multi_case(rnd, c.g, n, ctx);
}

TEST_CASE("cuda kernels: in_proj GEMV epilogue (conv + SiLU, gates) vs CPU reference") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("in_proj epilogue"));
    const auto ctx = test_ctx();
    for (int generic = 0; generic < 2; ++generic) {
        for (int use_conv = 0; use_conv < 2; ++use_conv) {
            const int silu_z = rnd.integer(0, 1);  // z rows stored through silu (decoding step) or raw
            const int H = 2, HV = 4, K = 16, V = 24, W = 4, D = 64;
            const int KD = H * K, VD = HV * V, CC = 2 * KD + VD;
            const int64_t row_g = CC, row_a = row_g + VD, row_b = row_a + HV, R = row_b + HV;
            const std::vector<float> wf = rnd.normals(size_t(R * D), 0.2f);
            const auto wb = to_bf16(wf);
            const auto h = rnd.normals(D), nw = rnd.unis(D, 0.7f, 1.3f);
            const auto convw = rnd.normals(size_t(CC * W), 0.5f), cache0 = rnd.normals(size_t((W - 1) * CC));
            const auto A_log = rnd.normals(HV, 0.5f), dt_bias = rnd.normals(HV, 0.5f);
            std::vector<float> xp(D);
            cpu::rmsnorm(h.data(), nw.data(), D, 1e-6f, xp.data());
            std::vector<float> want(static_cast<size_t>(R)), cache = cache0;
            for (int64_t r = 0; r < R; ++r) {
                double acc = 0;
                for (int c = 0; c < D; ++c) acc += double(bf16_to_f32(wb[size_t(r * D + c)])) * xp[static_cast<size_t>(c)];
                const float yv = float(acc);
                float out;
                if (r < CC) {
                    if (use_conv) {
                        float a = 0.f;
                        for (int j = 0; j < W - 1; ++j) a += convw[size_t(r * W + j)] * cache[size_t(j * CC + r)];
                        a += convw[size_t(r * W + W - 1)] * yv;
                        for (int j = 0; j + 1 < W - 1; ++j) cache[size_t(j * CC + r)] = cache[size_t((j + 1) * CC + r)];
                        cache[size_t((W - 2) * CC + r)] = yv;
                        out = cpu::silu(a);
                    } else {
                        out = cpu::silu(yv);
                    }
                } else if (r < row_a) {
                    out = silu_z ? cpu::silu(yv) : yv;
                } else if (r < row_b) {
                    out = cpu::gdn_decay_log(yv, A_log[size_t(r - row_a)], dt_bias[size_t(r - row_a)]);
                } else {
                    out = cpu::gdn_beta(yv, true);
                }
                want[static_cast<size_t>(r)] = out;
            }
            DevBuf<uint16_t> dw(wb);
            DevBuf<float> dh(h), dn(nw), dcw(convw), dcache(cache0), dA(A_log), ddt(dt_bias), dout(static_cast<size_t>(R));
            dout.poison();
            kern::GemvParams p;
            p.w = dw.p, p.rows = R, p.cols = D, p.pro = kern::GemvPrologue::RmsNorm, p.x = dh.p, p.norm_w = dn.p;
            p.eps = 1e-6f, p.epi = kern::GemvEpilogue::InProj, p.out = dout.p;
            p.conv_cache = dcache.p, p.conv_w = dcw.p, p.conv_size = W, p.conv_channels = CC;
            p.use_short_conv = use_conv, p.row_a = row_a, p.row_b = row_b, p.A_log = dA.p, p.dt_bias = ddt.p;
            p.beta_scale = 2.f, p.force_generic = generic, p.silu_z = silu_z;
            CK(kern::launch_gemv(p, ctx));
            CK(cudaDeviceSynchronize());
            INFO("generic=", generic, " conv=", use_conv, " silu_z=", silu_z);
            CHECK(max_rel(dout.download(), want) <= 1e-4);
            if (use_conv) CHECK(max_rel(dcache.download(), cache) <= 1e-5);
        }
    }
}

// ---- recurrent step over n tokens -----------------------------------------------------------------------

struct RecCase {
    int H, HV, K, V, n, normalize, pending;
};

void run_recurrent_case(Rand &rnd, const RecCase &rc, const kern::LaunchCtx &ctx) {
    INFO("recurrent H=", rc.H, " HV=", rc.HV, " K=", rc.K, " V=", rc.V, " n=", rc.n, " normalize=", rc.normalize,
         " pending=", rc.pending);
    const int H = rc.H, HV = rc.HV, K = rc.K, V = rc.V, n = rc.n, np = rc.pending, grp = HV / H;
    std::vector<float> q = rnd.normals(size_t(n * H * K)), k = rnd.normals(size_t(n * H * K));
    if (!rc.normalize)
        for (int t = 0; t < n; ++t)
            for (int h = 0; h < H; ++h) {
                cpu::l2_normalize(q.data() + (t * H + h) * K, K, 1.f / std::sqrt(float(K)));
                cpu::l2_normalize(k.data() + (t * H + h) * K, K, 1.f);
            }
    const auto v = rnd.normals(size_t(n * HV * V)), g = rnd.unis(size_t(n * HV), -1.5f, 0.f),
               beta = rnd.unis(size_t(n * HV), 0.f, 2.f);
    const auto state0 = rnd.normals(size_t(HV * V * K), 0.3f);  // [HV][V][K]
    std::vector<float> pk = rnd.normals(size_t(std::max(np, 1) * H * K));
    for (int t = 0; t < np; ++t)
        for (int h = 0; h < H; ++h) cpu::l2_normalize(pk.data() + (t * H + h) * K, K, 1.f);
    const auto pu = rnd.normals(size_t(std::max(np, 1) * HV * V)), pg = rnd.unis(size_t(std::max(np, 1) * HV), -1.f, 0.f);

    // Reference: per value head, state as [K][V] (the CPU engine's layout).
    std::vector<float> o_ref(size_t(n * HV * V)), u_ref(size_t(n * HV * V)), k_ref(size_t(n * H * K)),
        s_ref(state0.size());
    for (int hv = 0; hv < HV; ++hv) {
        const int h = hv / grp;
        std::vector<float> S(size_t(K * V));
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) S[size_t(i * V + j)] = state0[size_t((hv * V + j) * K + i)];
        for (int t = 0; t < np; ++t)
            cpu::gdn_apply_factor(S.data(), K, V, pk.data() + (t * H + h) * K, pu.data() + (t * HV + hv) * V,
                                  pg[size_t(t * HV + hv)]);
        for (int t = 0; t < n; ++t) {
            std::vector<float> qn(q.begin() + (t * H + h) * K, q.begin() + (t * H + h + 1) * K);
            std::vector<float> kn(k.begin() + (t * H + h) * K, k.begin() + (t * H + h + 1) * K);
            if (rc.normalize) {
                cpu::l2_normalize(qn.data(), K, 1.f / std::sqrt(float(K)));
                cpu::l2_normalize(kn.data(), K, 1.f);
            }
            cpu::gdn_step(S.data(), K, V, qn.data(), kn.data(), v.data() + (t * HV + hv) * V, beta[size_t(t * HV + hv)],
                          g[size_t(t * HV + hv)], o_ref.data() + (t * HV + hv) * V, u_ref.data() + (t * HV + hv) * V);
            std::copy(kn.begin(), kn.end(), k_ref.begin() + (t * H + h) * K);
        }
        for (int i = 0; i < K; ++i)
            for (int j = 0; j < V; ++j) s_ref[size_t((hv * V + j) * K + i)] = S[size_t(i * V + j)];
    }

    DevBuf<float> dq(q), dk(k), dv(v), dg(g), db(beta), ds(state0), do_(size_t(n * HV * V)), du(size_t(n * HV * V)),
        dko(size_t(n * H * K)), dpk(pk), dpu(pu), dpg(pg);
    do_.poison(), du.poison(), dko.poison();
    kern::RecurrentParams p;
    p.n_tokens = n, p.H = H, p.HV = HV, p.K = K, p.V = V;
    p.q = dq.p, p.k = dk.p, p.v = dv.p, p.g = dg.p, p.beta = db.p;
    p.q_tstride = H * K, p.q_hstride = K, p.v_tstride = HV * V, p.v_hstride = V, p.gb_tstride = HV, p.gb_hstride = 1;
    p.state = ds.p, p.o = do_.p, p.o_tstride = HV * V, p.o_hstride = V;
    p.normalize = rc.normalize, p.q_scale = 1.f / std::sqrt(float(K));
    p.k_out = dko.p, p.u_out = du.p;
    p.n_pending = np, p.pk = dpk.p, p.pu = dpu.p, p.pg = dpg.p;
    CK(kern::launch_gdn_recurrent(p, ctx));
    CK(cudaDeviceSynchronize());
    CHECK(max_rel(do_.download(), o_ref) <= 1e-4);
    CHECK(max_rel(ds.download(), s_ref) <= 1e-4);
    CHECK(max_rel(du.download(), u_ref) <= 1e-4);
    CHECK(max_rel(dko.download(), k_ref) <= 1e-5);
}

TEST_CASE("cuda kernels: recurrent GDN step over n tokens (state on chip) vs cpu::gdn_step") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("recurrent"));
    const auto ctx = test_ctx();
    const RecCase cases[] = {
        {1, 1, 16, 24, 1, 1, 0},   {3, 6, 16, 24, 3, 0, 2},  {2, 2, 32, 64, 5, 1, 0},   {2, 2, 128, 256, 2, 1, 3},
        {1, 2, 256, 256, 1, 1, 0}, {2, 2, 64, 48, 4, 0, 0},  {1, 1, 100, 40, 2, 1, 0},  {1, 1, 300, 32, 1, 1, 1},
        {8, 8, 256, 256, 1, 1, 0},
    };
    for (const RecCase &rc : cases) run_recurrent_case(rnd, rc, ctx);
}

// ---- conv + gates of a block ------------------------------------------------------------------------------

TEST_CASE("cuda kernels: block conv + SiLU + l2 norm + gates, and the conv cache update") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("conv prefill"));
    const auto ctx = test_ctx();
    for (int variant = 0; variant < 3; ++variant) {
        const int H = 2, HV = 4, K = 16, V = 24, W = 4;
        const int n = variant == 0 ? 7 : variant == 1 ? 2 : 70;
        const int Tp = variant == 2 ? 128 : n;
        const int use_conv = variant != 1;
        const int KD = H * K, VD = HV * V, CC = 2 * KD + VD;
        const int64_t row_a = CC + VD, row_b = row_a + HV, R = row_b + HV;
        const auto proj = rnd.normals(size_t(n * R)), cache0 = rnd.normals(size_t((W - 1) * CC));
        const auto convw = rnd.normals(size_t(CC * W), 0.5f), A_log = rnd.normals(HV, 0.5f),
                   dt_bias = rnd.normals(HV, 0.5f);
        // Reference, as CpuPassOps::conv_gates computes it.
        std::vector<float> q_ref(size_t(H * Tp * K), 0.f), k_ref(q_ref.size(), 0.f), v_ref(size_t(HV * Tp * V), 0.f),
            g_ref(size_t(HV * Tp), 0.f), b_ref(g_ref.size(), 0.f);
        for (int t = 0; t < n; ++t) {
            std::vector<float> m(static_cast<size_t>(CC));
            for (int c = 0; c < CC; ++c) {
                float acc = 0.f;
                for (int j = 0; j < W; ++j) {
                    const int src = t - (W - 1) + j;
                    const float in = src >= 0 ? proj[size_t(src * R + c)] : cache0[size_t((W - 1 + src) * CC + c)];
                    acc += convw[size_t(c * W + j)] * in;
                }
                m[static_cast<size_t>(c)] = cpu::silu(use_conv ? acc : proj[size_t(t * R + c)]);
            }
            for (int h = 0; h < H; ++h) {
                cpu::l2_normalize(m.data() + h * K, K, 1.f / std::sqrt(float(K)));
                cpu::l2_normalize(m.data() + KD + h * K, K, 1.f);
                for (int i = 0; i < K; ++i) {
                    q_ref[size_t((h * Tp + t) * K + i)] = m[size_t(h * K + i)];
                    k_ref[size_t((h * Tp + t) * K + i)] = m[size_t(KD + h * K + i)];
                }
            }
            for (int hv = 0; hv < HV; ++hv) {
                for (int j = 0; j < V; ++j) v_ref[size_t((hv * Tp + t) * V + j)] = m[size_t(2 * KD + hv * V + j)];
                g_ref[size_t(hv * Tp + t)] =
                    cpu::gdn_decay_log(proj[size_t(t * R + row_a + hv)], A_log[static_cast<size_t>(hv)], dt_bias[static_cast<size_t>(hv)]);
                b_ref[size_t(hv * Tp + t)] = cpu::gdn_beta(proj[size_t(t * R + row_b + hv)], false);
            }
        }
        std::vector<float> cache_ref(cache0.size());
        for (int r = 0; r < W - 1; ++r) {
            const int src = n - (W - 1) + r;
            for (int c = 0; c < CC; ++c)
                cache_ref[size_t(r * CC + c)] = src >= 0 ? proj[size_t(src * R + c)] : cache0[size_t((W - 1 + src) * CC + c)];
        }
        DevBuf<float> dproj(proj), dcache(cache0), dcw(convw), dA(A_log), ddt(dt_bias), dq(q_ref.size()),
            dk(k_ref.size()), dv(v_ref.size()), dg(g_ref.size()), db(b_ref.size());
        dq.poison(), dk.poison(), dv.poison(), dg.poison(), db.poison();
        kern::ConvPrefillParams p;
        p.n = n, p.n_padded = Tp, p.proj = dproj.p, p.proj_ld = R, p.conv_cache = dcache.p, p.conv_w = dcw.p;
        p.W = W, p.use_short_conv = use_conv, p.H = H, p.HV = HV, p.K = K, p.V = V;
        p.row_a = row_a, p.row_b = row_b, p.A_log = dA.p, p.dt_bias = ddt.p, p.beta_scale = 1.f;
        p.q_scale = 1.f / std::sqrt(float(K));
        p.q = dq.p, p.k = dk.p, p.v = dv.p, p.g = dg.p, p.beta = db.p;
        CK(kern::launch_conv_prefill(p, ctx));
        CK(kern::launch_conv_cache_update(dcache.p, dproj.p, R, n, W, CC, ctx));
        CK(cudaDeviceSynchronize());
        INFO("n=", n, " padded=", Tp);
        CHECK(max_rel(dq.download(), q_ref) <= 1e-4);
        CHECK(max_rel(dk.download(), k_ref) <= 1e-4);
        CHECK(max_rel(dv.download(), v_ref) <= 1e-4);
        CHECK(max_rel(dg.download(), g_ref) <= 1e-5);
        CHECK(max_rel(db.download(), b_ref) <= 1e-5);
        CHECK(max_rel(dcache.download(), cache_ref) == 0.0);
    }
}

// ---- chunk (WY) form ---------------------------------------------------------------------------------------

TEST_CASE("cuda kernels: chunk prep (WY inverse) and the tensor-core state pass vs the token loop") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("chunk form"));
    const auto ctx = test_ctx();
    struct Shape {
        int H, HV, K, V, n;
    };
    const Shape shapes[] = {{1, 2, 32, 64, 100}, {2, 2, 64, 32, 64}, {1, 1, 128, 256, 150}, {2, 4, 16, 16, 70},
                            {1, 1, 256, 256, 128}};
    const int C = kern::kChunk;
    for (const Shape &sh : shapes) {
        const int H = sh.H, HV = sh.HV, K = sh.K, V = sh.V, n = sh.n, grp = HV / H;
        const int Tp = (n + C - 1) / C * C, nc = Tp / C;
        INFO("chunk H=", H, " HV=", HV, " K=", K, " V=", V, " n=", n);
        // Head-major inputs as launch_conv_prefill writes them, zero padding rows.
        std::vector<float> q(size_t(H * Tp * K), 0.f), k(q.size(), 0.f), v(size_t(HV * Tp * V), 0.f),
            g(size_t(HV * Tp), 0.f), beta(g.size(), 0.f);
        for (int h = 0; h < H; ++h)
            for (int t = 0; t < n; ++t) {
                float *qr = q.data() + (h * Tp + t) * K, *kr = k.data() + (h * Tp + t) * K;
                for (int i = 0; i < K; ++i) qr[i] = rnd.normal(), kr[i] = rnd.normal();
                cpu::l2_normalize(qr, K, 1.f / std::sqrt(float(K)));
                cpu::l2_normalize(kr, K, 1.f);
            }
        for (int hv = 0; hv < HV; ++hv)
            for (int t = 0; t < n; ++t) {
                for (int j = 0; j < V; ++j) v[size_t((hv * Tp + t) * V + j)] = rnd.normal();
                g[size_t(hv * Tp + t)] = rnd.uni(-0.6f, 0.f);
                beta[size_t(hv * Tp + t)] = rnd.uni(0.f, 1.f);
            }
        const auto state0 = rnd.normals(size_t(HV * V * K), 0.3f);

        // G = K K^T and QK = Q K^T per key head and chunk (host, the cuBLAS step of the backend).
        std::vector<float> G(size_t(H * nc * C * C)), QK(G.size());
        for (int h = 0; h < H; ++h)
            for (int c = 0; c < nc; ++c)
                for (int i = 0; i < C; ++i)
                    for (int j = 0; j < C; ++j) {
                        double gg = 0, qk = 0;
                        for (int e = 0; e < K; ++e) {
                            const double kj = k[size_t((h * Tp + c * C + j) * K + e)];
                            gg += double(k[size_t((h * Tp + c * C + i) * K + e)]) * kj;
                            qk += double(q[size_t((h * Tp + c * C + i) * K + e)]) * kj;
                        }
                        G[size_t(((h * nc + c) * C + i) * C + j)] = float(gg);
                        QK[size_t(((h * nc + c) * C + i) * C + j)] = float(qk);
                    }
        DevBuf<float> dG(G), dQK(QK), dg(g), db(beta), dgam(g.size()), dPm(size_t(HV * nc * C * C)), dTb(dPm.n),
            dTu(dPm.n);
        dgam.poison(), dPm.poison(), dTb.poison(), dTu.poison();
        kern::ChunkPrepParams pp;
        pp.n_chunks = nc, pp.H = H, pp.HV = HV, pp.G = dG.p, pp.QK = dQK.p, pp.g = dg.p, pp.beta = db.p;
        pp.gam = dgam.p, pp.Pm = dPm.p, pp.Tb = dTb.p, pp.Tu = dTu.p;
        CK(kern::launch_chunk_prep(pp, ctx));
        CK(cudaDeviceSynchronize());

        // Reference prep in double.
        std::vector<float> gam_ref(g.size()), Pm_ref(dPm.n), Tb_ref(dPm.n), Tu_ref(dPm.n);
        std::vector<double> Tm(size_t(C * C));
        for (int hv = 0; hv < HV; ++hv)
            for (int c = 0; c < nc; ++c) {
                const int h = hv / grp;
                double acc = 0;
                std::vector<double> gm(C), bt(C);
                for (int i = 0; i < C; ++i) {
                    acc += g[size_t(hv * Tp + c * C + i)];
                    gm[static_cast<size_t>(i)] = acc;
                    bt[static_cast<size_t>(i)] = beta[size_t(hv * Tp + c * C + i)];
                    gam_ref[size_t(hv * Tp + c * C + i)] = float(acc);
                }
                const float *Gc = G.data() + (h * nc + c) * C * C, *Qc = QK.data() + (h * nc + c) * C * C;
                const size_t base = size_t((hv * nc + c) * C * C);
                for (int i = 0; i < C; ++i) {
                    for (int j = 0; j < C; ++j) {
                        Pm_ref[base + size_t(i * C + j)] = i >= j ? float(Qc[i * C + j] * std::exp(gm[static_cast<size_t>(i)] - gm[static_cast<size_t>(j)])) : 0.f;
                        double s = i == j ? 1.0 : 0.0;
                        for (int m = 0; m < i; ++m) {
                            const double a = bt[static_cast<size_t>(i)] * Gc[i * C + m] * std::exp(gm[static_cast<size_t>(i)] - gm[static_cast<size_t>(m)]);
                            s -= a * Tm[size_t(m * C + j)];
                        }
                        Tm[size_t(i * C + j)] = s;
                    }
                }
                for (int i = 0; i < C; ++i)
                    for (int j = 0; j < C; ++j) {
                        Tu_ref[base + size_t(i * C + j)] = float(Tm[size_t(i * C + j)] * bt[static_cast<size_t>(j)]);
                        Tb_ref[base + size_t(i * C + j)] = float(Tm[size_t(i * C + j)] * bt[static_cast<size_t>(j)] * std::exp(gm[static_cast<size_t>(j)]));
                    }
            }
        CHECK(max_rel(dgam.download(), gam_ref) <= 1e-5);
        CHECK(max_rel(dPm.download(), Pm_ref) <= 1e-4);
        CHECK(max_rel(dTb.download(), Tb_ref) <= 1e-4);
        CHECK(max_rel(dTu.download(), Tu_ref) <= 1e-4);

        // W = Tb K, U = Tu V (host, the other cuBLAS step), then the state pass.
        std::vector<float> Wm(size_t(HV * Tp * K)), Um(size_t(HV * Tp * V));
        for (int hv = 0; hv < HV; ++hv)
            for (int c = 0; c < nc; ++c) {
                const int h = hv / grp;
                const size_t base = size_t((hv * nc + c) * C * C);
                for (int i = 0; i < C; ++i) {
                    for (int e = 0; e < K; ++e) {
                        double s = 0;
                        for (int j = 0; j < C; ++j) s += double(Tb_ref[base + size_t(i * C + j)]) * k[size_t((h * Tp + c * C + j) * K + e)];
                        Wm[size_t((hv * Tp + c * C + i) * K + e)] = float(s);
                    }
                    for (int e = 0; e < V; ++e) {
                        double s = 0;
                        for (int j = 0; j < C; ++j) s += double(Tu_ref[base + size_t(i * C + j)]) * v[size_t((hv * Tp + c * C + j) * V + e)];
                        Um[size_t((hv * Tp + c * C + i) * V + e)] = float(s);
                    }
                }
            }
        DevBuf<float> dq(q), dk(k), dW(Wm), dU(Um), dPmr(Pm_ref), dgamr(gam_ref), ds(state0), dO(size_t(HV * Tp * V));
        dO.poison();
        kern::ChunkPassParams sp;
        sp.n_chunks = nc, sp.H = H, sp.HV = HV, sp.K = K, sp.V = V, sp.q = dq.p, sp.k = dk.p, sp.W = dW.p, sp.U = dU.p;
        sp.Pm = dPmr.p, sp.gam = dgamr.p, sp.state = ds.p, sp.o = dO.p;
        CK(kern::launch_chunk_state_pass(sp, ctx));
        CK(cudaDeviceSynchronize());

        // The exact token loop.
        std::vector<float> o_ref(size_t(HV * Tp * V), 0.f), s_ref(state0.size());
        for (int hv = 0; hv < HV; ++hv) {
            const int h = hv / grp;
            std::vector<float> S(size_t(K * V));
            for (int i = 0; i < K; ++i)
                for (int j = 0; j < V; ++j) S[size_t(i * V + j)] = state0[size_t((hv * V + j) * K + i)];
            for (int t = 0; t < n; ++t)
                cpu::gdn_step(S.data(), K, V, q.data() + (h * Tp + t) * K, k.data() + (h * Tp + t) * K,
                              v.data() + (hv * Tp + t) * V, beta[size_t(hv * Tp + t)], g[size_t(hv * Tp + t)],
                              o_ref.data() + (hv * Tp + t) * V, nullptr);
            for (int i = 0; i < K; ++i)
                for (int j = 0; j < V; ++j) s_ref[size_t((hv * V + j) * K + i)] = S[size_t(i * V + j)];
        }
        std::vector<float> o_got = dO.download();
        // Compare the real rows only (padding rows are not outputs).
        std::vector<float> a, b;
        for (int hv = 0; hv < HV; ++hv)
            for (int t = 0; t < n; ++t)
                for (int j = 0; j < V; ++j) {
                    a.push_back(o_got[size_t((hv * Tp + t) * V + j)]);
                    b.push_back(o_ref[size_t((hv * Tp + t) * V + j)]);
                }
        const double eo = max_rel(a, b), es = max_rel(ds.download(), s_ref);
        MESSAGE("chunk K=" << K << " V=" << V << " n=" << n << ": output rel err " << eo << ", state rel err " << es);
        CHECK(eo <= 1e-2);
        CHECK(es <= 1e-2);
    }
}

// ---- norms, SwiGLU, embedding ---------------------------------------------------------------------------------

std::vector<float> from_bf16(const std::vector<uint16_t> &v) {
    std::vector<float> r(v.size());
    for (size_t i = 0; i < v.size(); ++i) r[i] = bf16_to_f32(v[i]);
    return r;
}

TEST_CASE("cuda kernels: norm rows, gated norm rows, SwiGLU rows, embedding gather") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("rows"));
    const auto ctx = test_ctx();
    const int n = 5, D = 384, HV = 3, V = 40, I = 300, vocab = 50;
    // RMSNorm rows (rows `ldx` apart).
    const int ldx = D + 16;
    const auto x = rnd.normals(size_t(n * ldx), 2.f), w = rnd.unis(D, 0.5f, 1.5f);
    std::vector<float> want(size_t(n * D));
    for (int t = 0; t < n; ++t) cpu::rmsnorm(x.data() + t * ldx, w.data(), D, 1e-6f, want.data() + t * D);
    DevBuf<float> dx(x), dw(w);
    DevBuf<uint16_t> dout(size_t(n * D));
    CK(kern::launch_rmsnorm_rows(dx.p, ldx, dw.p, n, D, 1e-6f, dout.p, ctx));
    CK(cudaDeviceSynchronize());
    CHECK(max_rel(from_bf16(dout.download()), want) <= 8e-3);

    // Gated norm rows over head-major o and row-major z.
    const int Tp = 8, zld = HV * V + 7;
    const auto o = rnd.normals(size_t(HV * Tp * V)), z = rnd.normals(size_t(n * zld)), on = rnd.unis(V, 0.5f, 1.5f);
    std::vector<float> gwant(size_t(n * HV * V));
    for (int t = 0; t < n; ++t)
        for (int hv = 0; hv < HV; ++hv)
            cpu::gated_rmsnorm(o.data() + (hv * Tp + t) * V, on.data(), z.data() + t * zld + hv * V, V, 1e-5f,
                               gwant.data() + (t * HV + hv) * V);
    DevBuf<float> dO(o), dz(z), don(on);
    DevBuf<uint16_t> dy(size_t(n * HV * V));
    CK(kern::launch_gated_norm_rows(dO.p, V, Tp * V, dz.p, zld, don.p, n, HV, V, 1e-5f, dy.p, ctx));
    CK(cudaDeviceSynchronize());
    CHECK(max_rel(from_bf16(dy.download()), gwant) <= 8e-3);

    // SwiGLU rows.
    const auto gu = rnd.normals(size_t(n * 2 * I), 2.f);
    std::vector<float> swant(size_t(n * I));
    for (int t = 0; t < n; ++t)
        for (int j = 0; j < I; ++j) swant[size_t(t * I + j)] = cpu::silu(gu[size_t(t * 2 * I + j)]) * gu[size_t(t * 2 * I + I + j)];
    DevBuf<float> dgu(gu);
    DevBuf<uint16_t> dact(size_t(n * I));
    CK(kern::launch_swiglu_rows(dgu.p, n, I, dact.p, ctx));
    CK(cudaDeviceSynchronize());
    CHECK(max_rel(from_bf16(dact.download()), swant) <= 8e-3);

    // Embedding gather: exact (bf16 -> fp32).
    const auto emb = to_bf16(rnd.normals(size_t(vocab * D)));
    std::vector<int32_t> toks = {3, 49, 0, 17, 3};
    DevBuf<uint16_t> demb(emb);
    DevBuf<int32_t> dt(toks);
    DevBuf<float> dh(size_t(n * D));
    DevBuf<unsigned long long> slot(1);
    CK(cudaMemset(slot.p, 0x7f, 8));
    CK(kern::launch_embedding(demb.p, dt.p, n, D, dh.p, D, slot.p, ctx));
    CK(cudaDeviceSynchronize());
    const auto h = dh.download();
    bool same = true;
    for (int t = 0; t < n; ++t)
        for (int c = 0; c < D; ++c) same &= h[size_t(t * D + c)] == bf16_to_f32(emb[size_t(toks[static_cast<size_t>(t)] * D + c)]);
    CHECK(same);
    CHECK(slot.download()[0] == 0ull);
    // Into rows 2D apart (a drafter's [embedding | feature] fc input): the second halves untouched.
    DevBuf<float> dwide(size_t(n * 2 * D));
    dwide.poison();
    CK(kern::launch_embedding(demb.p, dt.p, n, D, dwide.p, 2 * D, nullptr, ctx));
    CK(cudaDeviceSynchronize());
    const auto wide = dwide.download();
    bool strided = true, untouched = true;
    for (int t = 0; t < n; ++t)
        for (int c = 0; c < D; ++c) {
            strided &= wide[size_t(t * 2 * D + c)] == bf16_to_f32(emb[size_t(toks[static_cast<size_t>(t)] * D + c)]);
            untouched &= std::isnan(wide[size_t(t * 2 * D + D + c)]);
        }
    CHECK(strided);
    CHECK(untouched);
    CHECK(kern::launch_embedding(demb.p, dt.p, n, D, dwide.p, D - 1, nullptr, ctx) == cudaErrorInvalidValue);
}

// ---- token selection ------------------------------------------------------------------------------------------

TEST_CASE("cuda kernels: argmax and top-k/top-p sampling equal the host sampler") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("sampling"));
    for (int vocab : {300, 8192, 32000}) {
        std::vector<float> logits = rnd.normals(static_cast<size_t>(vocab), 3.f);
        // Ties and signed zeros: the lowest id must win.
        const int a = rnd.integer(0, vocab / 2), b = rnd.integer(vocab / 2 + 1, vocab - 1);
        logits[static_cast<size_t>(a)] = logits[static_cast<size_t>(b)] = 50.f;
        const size_t total = static_cast<size_t>(vocab) * 4;
        DevBuf<float> dl(logits), kin(static_cast<size_t>(vocab)), kout(static_cast<size_t>(vocab));
        DevBuf<int32_t> iin(static_cast<size_t>(vocab)), iout(static_cast<size_t>(vocab)), sc(4), tok(1);
        DevBuf<double> w(static_cast<size_t>(vocab)), cum(static_cast<size_t>(vocab)), pd(static_cast<size_t>(vocab));
        DevBuf<unsigned long long> slot(1);
        const size_t tb = kern::sampling_temp_bytes(vocab);
        DevBuf<char> temp(tb);
        kern::SamplingBuffers sb;
        sb.keys_in = kin.p, sb.keys_out = kout.p, sb.ids_in = iin.p, sb.ids_out = iout.p, sb.w = w.p, sb.cum = cum.p;
        sb.pd = pd.p, sb.scalars = sc.p, sb.temp = temp.p, sb.temp_bytes = tb;
        (void)total;

        CK(kern::launch_argmax(dl.p, vocab, slot.p, tok.p, nullptr));
        CK(cudaDeviceSynchronize());
        CHECK(tok.download()[0] == specla::argmax(logits.data(), vocab));
        CHECK(tok.download()[0] == a);
        // Signed zero: -0 before +0 in id order, everything else negative.
        std::vector<float> z(static_cast<size_t>(vocab), -1.f);
        z[5] = -0.f, z[9] = 0.f;
        dl.upload(z);
        CK(kern::launch_argmax(dl.p, vocab, slot.p, tok.p, nullptr));
        CK(cudaDeviceSynchronize());
        CHECK(tok.download()[0] == specla::argmax(z.data(), vocab));
        dl.upload(logits);

        struct Cfg {
            float t;
            int k;
            float p;
        };
        const Cfg cfgs[] = {{1.f, 0, 1.f}, {0.7f, 5, 1.f}, {1.3f, 0, 0.9f}, {1.f, 50, 0.5f}, {2.f, 0, 0.f},
                            {0.5f, 2, 0.95f}, {1.f, vocab + 5, 0.99f}};
        int mismatches = 0, draws = 0;
        for (const Cfg &cf : cfgs) {
            SamplingConfig sc_host;
            sc_host.temperature = cf.t, sc_host.top_k = cf.k, sc_host.top_p = cf.p;
            for (int r = 0; r < 40; ++r) {
                const double u = r == 0 ? 0.0 : r == 1 ? 0.9999999 : double(rnd.uni(0.f, 1.f));
                const int32_t want = sample_token(logits.data(), vocab, sc_host, u);
                CK(kern::launch_sample(dl.p, vocab, cf.t, cf.k, cf.p, u, sb, tok.p, nullptr));
                CK(cudaDeviceSynchronize());
                const int32_t got = tok.download()[0];
                ++draws;
                if (got != want) {
                    ++mismatches;
                    MESSAGE("vocab " << vocab << " T=" << cf.t << " k=" << cf.k << " p=" << cf.p << " u=" << u
                                     << ": gpu " << got << " host " << want);
                }
            }
        }
        CHECK(mismatches == 0);
        (void)draws;
    }
}

TEST_CASE("cuda kernels: top tokens of logit rows equal the host's top_tokens") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("top tokens"));
    int checked = 0;
    for (int vocab : {7, 300, 32000}) {
        for (int32_t k : {1, 2, 4, 8, 9, 17, int32_t(kern::kMaxTopTokens)}) {  // both kernels (<= 8: one read)
            const int32_t rows = 1 + rnd.integer(0, 9);
            const int32_t ld = vocab + rnd.integer(0, 3);  // rows padded beyond the vocabulary
            std::vector<float> logits = rnd.normals(size_t(rows) * size_t(ld), 4.f);
            const int32_t n_cand = rnd.integer(0, 3) == 0 ? std::max(1, vocab - 3) : vocab;  // a padded vocabulary
            for (int32_t r = 0; r < rows; ++r) {
                float *row = logits.data() + size_t(r) * size_t(ld);
                // Ties (the lower id first), signed zeros equal, masked ids (-inf), padding that
                // would win were it a candidate.
                const int a = rnd.integer(0, vocab - 1), b = rnd.integer(0, vocab - 1);
                row[a] = row[b] = 9.f;
                if (vocab > 10) row[3] = -0.f, row[8] = 0.f;
                if (r % 3 == 1) row[rnd.integer(0, vocab - 1)] = -INFINITY;
                if (r % 4 == 3)  // a row with fewer finite candidates than k
                    for (int32_t t = 0; t < vocab; ++t)
                        if (t % 5 != 0) row[t] = -INFINITY;
                for (int32_t t = n_cand; t < ld; ++t) row[t] = 100.f;
            }
            DevBuf<float> dl(logits);
            DevBuf<int32_t> ids(size_t(rows) * size_t(k));
            DevBuf<float> logp(size_t(rows) * size_t(k));
            ids.poison();
            logp.poison();
            CK(kern::launch_top_tokens(dl.p, ld, rows, n_cand, k, ids.p, logp.p, nullptr));
            CK(cudaDeviceSynchronize());
            const std::vector<int32_t> got_ids = ids.download();
            const std::vector<float> got_logp = logp.download();
            for (int32_t r = 0; r < rows; ++r) {
                std::vector<int32_t> want_ids(static_cast<size_t>(k));
                std::vector<float> want_logp(static_cast<size_t>(k));
                specla::top_tokens(logits.data() + size_t(r) * size_t(ld), n_cand, k, want_ids.data(), want_logp.data());
                for (int32_t i = 0; i < k; ++i) {
                    CAPTURE(vocab);
                    CAPTURE(k);
                    CAPTURE(r);
                    CAPTURE(i);
                    CHECK(got_ids[size_t(r) * size_t(k) + size_t(i)] == want_ids[size_t(i)]);
                    const float g = got_logp[size_t(r) * size_t(k) + size_t(i)], w = want_logp[size_t(i)];
                    if (std::isinf(w)) CHECK(g == w);
                    else CHECK(std::fabs(g - w) <= 1e-5f * std::max(1.f, std::fabs(w)));
                    ++checked;
                }
            }
        }
    }
    MESSAGE(checked << " top-token entries equal to the host's");
    // Out-of-range requests are refused, not launched.
    DevBuf<float> one(std::vector<float>(8, 0.f));
    DevBuf<int32_t> ids(128);
    DevBuf<float> lp(128);
    CHECK(kern::launch_top_tokens(one.p, 8, 1, 8, 0, ids.p, lp.p, nullptr) == cudaErrorInvalidValue);
    CHECK(kern::launch_top_tokens(one.p, 8, 1, 8, kern::kMaxTopTokens + 1, ids.p, lp.p, nullptr) ==
          cudaErrorInvalidValue);
    CHECK(kern::launch_top_tokens(one.p, 4, 1, 8, 2, ids.p, lp.p, nullptr) == cudaErrorInvalidValue);
}

TEST_CASE("cuda kernels: the fixed-width drafting beam step equals the host rule") {
    CUDA_TEST_REQUIRE_GPU();
    Rand rnd(fresh_seed("beam step"));
    const kern::LaunchCtx ctx = test_ctx();
    int checked = 0;
    for (int trial = 0; trial < 120; ++trial) {
        const int32_t widths[] = {1, 2, 3, 4, 5, 8, 16, 32};
        const int32_t W = widths[rnd.integer(0, 7)], level = rnd.integer(1, 5);
        const int64_t D = rnd.integer(1, 70);
        const int32_t rows = level == 1 ? 1 : rnd.integer(0, W);
        CAPTURE(trial);
        CAPTURE(W);
        CAPTURE(level);
        CAPTURE(rows);
        // Top-token rows, most probable first, log-probabilities on a grid (ties within and
        // across rows), some rows ending early (id -1 or -inf), a first entry above 0 now and then
        // (clamped to 0 as TreeBuilder::push_candidate does).
        const int32_t in_rows = level == 1 ? 1 : W;
        std::vector<int32_t> ids(size_t(in_rows) * size_t(W), -1);
        std::vector<float> logp(ids.size(), -INFINITY);
        for (int32_t r = 0; r < in_rows; ++r) {
            const int32_t valid = rnd.integer(0, 3) == 0 ? rnd.integer(0, W) : W;
            float lp = rnd.integer(0, 4) == 0 ? 0.5f : -0.25f * float(rnd.integer(0, 3));
            for (int32_t i = 0; i < valid; ++i) {
                ids[size_t(r) * size_t(W) + size_t(i)] = rnd.integer(0, 999);
                logp[size_t(r) * size_t(W) + size_t(i)] = lp;
                lp -= 0.25f * float(rnd.integer(0, 2));
            }
            if (valid < W && rnd.integer(0, 1)) ids[size_t(r) * size_t(W) + size_t(valid)] = 7;  // id, -inf
        }
        std::vector<float> scores_in(static_cast<size_t>(W));
        // Scores as the builder makes them: sums from the root's +0 of logps clamped to <= 0, so
        // never -0 (0 - 0.25 * 0 is +0; -0.25 * 0 would be -0, whose sum with a clamped +0 the
        // device was seen to round to -0 where the host gives +0: equal, but not bitwise).
        for (float &x : scores_in) x = 0.f - 0.25f * float(rnd.integer(0, 12));
        const std::vector<float> features = rnd.normals(size_t(level == 1 ? 1 : W) * size_t(D));

        // The host rule (engine/fixed_width_draft.h, checked against TreeBuilder's on the CPU).
        FixedWidthFrontier want;
        fixed_width_frontier(ids.data(), logp.data(), rows, W, level == 1 ? nullptr : scores_in.data(), want);
        const int32_t count = want.count;

        DevBuf<int32_t> d_ids(ids), d_count_in(std::vector<int32_t>{rows});
        DevBuf<float> d_logp(logp), d_scores_in(scores_in), d_features(features);
        DevBuf<int32_t> count_out(1), tokens_out(static_cast<size_t>(W)), parents_out(static_cast<size_t>(W)), pass_tokens(static_cast<size_t>(W));
        DevBuf<int32_t> chain_info(std::vector<int32_t>(size_t(3 * W), 12345)), snap(static_cast<size_t>(W)), win_in(static_cast<size_t>(W)),
            win_out(static_cast<size_t>(W));
        DevBuf<float> scores_out(static_cast<size_t>(W)), row_in(std::vector<float>(size_t(W) * size_t(2 * D), 3.f));
        for (auto *b : {&count_out, &tokens_out, &parents_out, &pass_tokens, &snap, &win_in, &win_out}) b->poison();
        scores_out.poison();
        kern::BeamStepParams bp;
        bp.width = W, bp.level = level, bp.D = D;
        bp.ids = d_ids.p, bp.logp = d_logp.p, bp.scores_in = d_scores_in.p, bp.count_in = d_count_in.p;
        bp.features = d_features.p;
        bp.count_out = count_out.p, bp.scores_out = scores_out.p, bp.tokens_out = tokens_out.p;
        bp.parents_out = parents_out.p, bp.pass_tokens = pass_tokens.p, bp.row_in = row_in.p;
        bp.chain_info = chain_info.p, bp.snap_slot = snap.p, bp.window_in = win_in.p, bp.window_out = win_out.p;
        CK(kern::launch_beam_step(bp, ctx));
        CK(cudaDeviceSynchronize());

        CHECK(count_out.download()[0] == count);
        const auto g_scores = scores_out.download();
        const auto g_tokens = tokens_out.download(), g_parents = parents_out.download();
        const auto g_pass = pass_tokens.download(), g_chain = chain_info.download(), g_snap = snap.download();
        const auto g_win_in = win_in.download(), g_win_out = win_out.download();
        const auto g_row_in = row_in.download();
        const int32_t own = (level % 2) * W, parents_base = ((level - 1) % 2) * W;
        for (int32_t b = 0; b < W; ++b) {
            CAPTURE(b);
            const bool ok = b < count;
            const int32_t token = want.tokens[size_t(b)], row = want.parents[size_t(b)];
            CHECK(std::memcmp(&g_scores[size_t(b)], &want.scores[size_t(b)], 4) == 0);  // bitwise
            CHECK(g_tokens[size_t(b)] == token);
            CHECK(g_parents[size_t(b)] == row);
            CHECK(g_pass[size_t(b)] == (ok ? token : 0));
            const int32_t start = ok && level > 1 ? parents_base + row : -1;
            CHECK(g_chain[size_t(3 * b)] == 12345);  // first and length are the host's
            CHECK(g_chain[size_t(3 * b + 1)] == 12345);
            CHECK(g_chain[size_t(3 * b + 2)] == start);
            CHECK(g_snap[size_t(b)] == own + b);
            CHECK(g_win_in[size_t(b)] == start);
            CHECK(g_win_out[size_t(b)] == own + b);
            const int32_t fr = ok ? (level == 1 ? 0 : row) : -1;
            bool row_ok = true;
            for (int64_t d = 0; d < D; ++d) {
                row_ok &= g_row_in[size_t(b * 2 * D + d)] == 3.f;  // the embedding half is not touched
                row_ok &= g_row_in[size_t(b * 2 * D + D + d)] == (fr < 0 ? 0.f : features[size_t(fr * D + d)]);
            }
            CHECK(row_ok);
            ++checked;
        }
    }
    MESSAGE(checked << " frontier entries equal to the host rule's");
    kern::BeamStepParams bad;
    bad.width = 33, bad.level = 1;  // 33 * 33 candidates do not fit
    CHECK(kern::launch_beam_step(bad, ctx) == cudaErrorInvalidValue);
    bad.width = 4, bad.level = 0;
    CHECK(kern::launch_beam_step(bad, ctx) == cudaErrorInvalidValue);
}

}  // namespace

#endif  // SPECLA_WITH_CUDA
