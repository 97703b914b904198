// The CUDA backend against the CPU backend (the reference engine) on random models of several
// shapes and on fla's fixtures, plus its own invariants (block vs token-by-token, graph vs eager,
// device sampling vs the host sampler, out-of-memory, device errors). Seeds are fresh per run and
// printed.
//
// Tolerances, max |gpu - ref| / max |ref| over the compared values:
//   decoding steps (one token at a time) vs the CPU backend given the SAME bf16 weights: 2e-3.
//     Both run fp32 activations and fp32 accumulation over identical bf16 weights; only summation
//     order differs (observed ~1e-5 on these shapes). The bound leaves room for deeper models.
//   blocks of n > 1 tokens (prefill, chains): 4e-2. The projections run as cuBLAS GEMMs with the
//     activations rounded to bf16 (2^-9 relative each), and the chunk form adds TF32 products.
//   against fla's fp32 fixtures (the GPU holds the fixture's F32 weights rounded to bf16): 5e-2.
//   graph replay vs eager launches: bitwise equal (same kernels, deterministic reductions).
//   token selection: exact.
#include "test_cuda_common.h"

#ifndef SPECLA_WITH_CUDA

TEST_CASE("cuda backend: skipped") { MESSAGE("CUDA backend tests skipped: this build has no CUDA support"); }

#else

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "backend/cuda/cuda_backend.h"
#include "engine/backend.h"
#include "sampling/sampler.h"
#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "model/weights.h"

using namespace specla;
using namespace cudatest;

namespace {

constexpr double kDecodeTol = 2e-3;
constexpr double kBlockTol = 4e-2;
constexpr double kFixtureTol = 5e-2;

const Shape kShapes[] = {
    {"tiny-a-like", 128, 2, 2, 2, 32, 64, 384, 512},
    {"grouped, neg eigval, tied", 96, 3, 3, 6, 16, 24, 256, 300, true, true, true, true, 1e-5f},
    {"22m-like", 384, 2, 2, 2, 128, 256, 1024, 1000},
    {"no gate, no conv", 64, 2, 1, 1, 64, 64, 128, 100, false, false},
    {"odd sizes (generic kernels)", 100, 2, 2, 2, 20, 20, 200, 77},
};

std::vector<int32_t> random_tokens(std::mt19937_64 &g, int n, int vocab) {
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto &x : t) x = int32_t(g() % uint64_t(vocab));
    return t;
}

std::vector<float> eval(Backend &b, SequenceState &s, const std::vector<int32_t> &toks, LogitsRows rows) {
    const size_t vocab = size_t(b.config().vocab_size);
    std::vector<float> out(rows == LogitsRows::All ? toks.size() * vocab : rows == LogitsRows::Last ? vocab : 0);
    b.eval_chain(s, toks.data(), int32_t(toks.size()), rows, out.empty() ? nullptr : out.data());
    return out;
}

std::vector<float> state_of(Backend &b, SequenceState &s, int layer) {
    std::vector<float> out(size_t(b.config().recurrent_state_floats_per_layer()));
    b.read_recurrent_state(s, layer, out.data());
    return out;
}

SessionLimits limits(int tokens) {
    SessionLimits l;
    l.max_batch_tokens = tokens;
    l.max_tree_nodes = 16;
    return l;
}

TEST_CASE("cuda backend: decoding steps and states equal the CPU backend on random models") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("backend decode");
    std::mt19937_64 g(seed);
    for (const Shape &s : kShapes) {
        const ModelConfig c = make_config(s);
        ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto cpu = create_cpu_backend(c, w, 2);
        const auto toks = random_tokens(g, 12, c.vocab_size);
        auto gpu = create_cuda_backend_ex(c, w, 0, CudaBackendOptions{});
        auto gs = gpu->create_state(limits(64));
        auto cs = cpu->create_state(limits(64));
        double worst = 0;
        for (int32_t t : toks) {
            const auto a = eval(*gpu, *gs, {t}, LogitsRows::Last);
            const auto b = eval(*cpu, *cs, {t}, LogitsRows::Last);
            worst = std::max(worst, max_rel(a, b));
        }
        double worst_state = 0;
        for (int l = 0; l < c.num_layers; ++l)
            worst_state = std::max(worst_state, max_rel(state_of(*gpu, *gs, l), state_of(*cpu, *cs, l)));
        auto *cb = dynamic_cast<cuda::CudaBackend *>(gpu.get());
        MESSAGE(std::string(s.name) << " [" << cb->decode_mode(*gs) << "]: decode logits rel err " << worst
                                    << ", state rel err " << worst_state);
        CHECK(worst <= kDecodeTol);
        CHECK(worst_state <= kDecodeTol);
    }
}

// Per row of a block's logits: max |a - b| over the row / max |b| over the block (max_rel's scale).
std::vector<double> row_rel(const std::vector<float> &a, const std::vector<float> &b, size_t vocab) {
    REQUIRE(a.size() == b.size());
    double den = 0;
    for (float x : b) den = std::max(den, double(std::fabs(x)));
    std::vector<double> out(b.size() / vocab, 0.0);
    for (size_t i = 0; i < b.size(); ++i) {
        const double d = std::fabs(double(a[i]) - double(b[i]));
        out[i / vocab] = std::max(out[i / vocab], d == d ? d / (den > 0 ? den : 1) : INFINITY);
    }
    return out;
}

// How far rounding-sized changes move each row of the CPU reference: the reference again with
// every norm weight scaled by 1 +- 2^-9 (random signs), about what rounding the normalised
// activations to bf16 before each product does on the GPU (blocks use bf16 cuBLAS products). Rare
// random models have a row that this moves by several percent (seen once: one row of the one-head
// shape at n=5 moved by 0.02-0.12 and differed from the GPU by 0.11). Max over a few draws, rows of
// the prompt then of the next block.
struct RowSensitivity {
    std::vector<double> block, next;
};
RowSensitivity reference_sensitivity(const ModelConfig &c, const ModelWeights &w, const std::vector<int32_t> &prompt,
                                     const std::vector<int32_t> &more, const std::vector<float> &want,
                                     const std::vector<float> &want_more, std::mt19937_64 &g) {
    const size_t vocab = size_t(c.vocab_size);
    RowSensitivity r{std::vector<double>(prompt.size(), 0.0), std::vector<double>(more.size(), 0.0)};
    for (int draw = 0; draw < 3; ++draw) {
        ModelWeights p = w;
        auto nudge = [&](HostVec<float> &v) {
            for (float &x : v) x *= (g() & 1) ? 1.f + 1.f / 512 : 1.f - 1.f / 512;
        };
        for (LayerWeights &lw : p.layers) nudge(lw.attn_norm), nudge(lw.o_norm), nudge(lw.mlp_norm);
        nudge(p.final_norm);
        auto cpu = create_cpu_backend(c, p, 2);
        auto st = cpu->create_state(limits(256));
        const auto a = row_rel(eval(*cpu, *st, prompt, LogitsRows::All), want, vocab);
        const auto b = row_rel(eval(*cpu, *st, more, LogitsRows::All), want_more, vocab);
        for (size_t i = 0; i < a.size(); ++i) r.block[i] = std::max(r.block[i], a[i]);
        for (size_t i = 0; i < b.size(); ++i) r.next[i] = std::max(r.next[i], b[i]);
    }
    return r;
}

// Rows within kBlockTol plus three times the reference's own sensitivity: the worst row's ratio of
// error to that bound (<= 1 passes).
double worst_row_ratio(const std::vector<double> &err, const std::vector<double> &sens) {
    double worst = 0;
    for (size_t i = 0; i < err.size(); ++i) worst = std::max(worst, err[i] / (kBlockTol + 3 * sens[i]));
    return worst;
}

TEST_CASE("cuda backend: blocks (prefill, chunk and recurrent forms) vs CPU and vs token-by-token") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("backend blocks");
    std::mt19937_64 g(seed);
    std::mt19937_64 nudges(seed ^ 0x9e3779b97f4a7c15ull);  // separate, so a replayed seed draws the same models
    for (const Shape &s : kShapes) {
        const ModelConfig c = make_config(s);
        ModelWeights w = random_weights(c, g(), WeightType::BF16);
        auto cpu = create_cpu_backend(c, w, 2);
        CudaBackendOptions chunk_opts, rec_opts;
        chunk_opts.chunk_min_tokens = 1;       // every block in the chunk form where supported
        rec_opts.chunk_min_tokens = 1 << 30;   // every block with the recurrent kernel
        auto gpu_chunk = create_cuda_backend_ex(c, w, 0, chunk_opts);
        auto gpu_rec = create_cuda_backend_ex(c, w, 0, rec_opts);
        for (int n : {5, 40, 130}) {
            const auto prompt = random_tokens(g, n, c.vocab_size);
            const auto more = random_tokens(g, 3, c.vocab_size);
            auto cs = cpu->create_state(limits(256));
            const auto want = eval(*cpu, *cs, prompt, LogitsRows::All);
            const auto want_more = eval(*cpu, *cs, more, LogitsRows::All);
            const RowSensitivity sens = reference_sensitivity(c, w, prompt, more, want, want_more, nudges);
            const double sens_max = *std::max_element(sens.block.begin(), sens.block.end());
            for (Backend *gpu : {gpu_chunk.get(), gpu_rec.get()}) {
                const bool is_chunk = gpu == gpu_chunk.get();
                auto gs = gpu->create_state(limits(256));
                const auto got = eval(*gpu, *gs, prompt, LogitsRows::All);
                const auto got_more = eval(*gpu, *gs, more, LogitsRows::All);
                double es = 0;
                for (int l = 0; l < c.num_layers; ++l) es = std::max(es, max_rel(state_of(*gpu, *gs, l), state_of(*cpu, *cs, l)));
                const size_t vocab = size_t(c.vocab_size);
                const double e1 = max_rel(got, want), e2 = max_rel(got_more, want_more);
                const double r1 = worst_row_ratio(row_rel(got, want, vocab), sens.block);
                const double r2 = worst_row_ratio(row_rel(got_more, want_more, vocab), sens.next);
                MESSAGE(std::string(s.name) << " n=" << n << std::string(is_chunk ? " chunk-form" : " recurrent") << ": block logits rel err " << e1
                               << ", next block " << e2 << ", state " << es << " (reference's own sensitivity up to " << sens_max
                               << "; worst row at " << std::max(r1, r2) << " of its bound)");
                CHECK(r1 <= 1.0);
                CHECK(r2 <= 1.0);
                CHECK(es <= kBlockTol);
            }
            // Block vs token by token on the GPU: last logits and the state.
            auto a = gpu_chunk->create_state(limits(256));
            auto b = gpu_chunk->create_state(limits(256));
            const auto block_last = eval(*gpu_chunk, *a, prompt, LogitsRows::Last);
            std::vector<float> step_last;
            for (int32_t t : prompt) step_last = eval(*gpu_chunk, *b, {t}, LogitsRows::Last);
            const double e = max_rel(block_last, step_last);
            double es = 0;
            for (int l = 0; l < c.num_layers; ++l) es = std::max(es, max_rel(state_of(*gpu_chunk, *a, l), state_of(*gpu_chunk, *b, l)));
            MESSAGE(std::string(s.name) << " n=" << n << ": block vs token-by-token logits " << e << ", state " << es);
            CHECK(e <= kBlockTol);
            CHECK(es <= kBlockTol);
        }
    }
}

struct Fixture {
    std::unique_ptr<SafetensorsFile> file;
    std::vector<float> f32(const std::string &name) const {
        const TensorView *v = file->find(name);
        REQUIRE(v != nullptr);
        std::vector<float> out(size_t(v->numel()));
        convert_to_f32(*v, out.data());
        return out;
    }
    std::vector<int32_t> i32(const std::string &name) const {
        const TensorView *v = file->find(name);
        REQUIRE(v != nullptr);
        REQUIRE(v->dtype == DType::I32);
        std::vector<int32_t> out(size_t(v->numel()));
        std::memcpy(out.data(), v->data, out.size() * 4);
        return out;
    }
};

TEST_CASE("cuda backend: fla fixtures gdn_tiny_a and gdn_tiny_b") {
    CUDA_TEST_REQUIRE_GPU();
    for (const char *name : {"gdn_tiny_a", "gdn_tiny_b"}) {
        // The environment may point at the fixtures when the program runs away from its source tree.
        const char *env = std::getenv("SPECLA_TEST_DATA_DIR");
        const std::string dir = std::string(env && *env ? env : SPECLA_TEST_DATA_DIR) + "/" + name;
        auto ck = Checkpoint::open(dir);
        const ModelConfig c = ck->config();
        ModelWeights w = load_weights(*ck, nullptr);
        Fixture ex{SafetensorsFile::open(dir + "/expected.safetensors")};
        const auto prompt = ex.i32("input_ids");
        const auto greedy = ex.i32("greedy_tokens");
        const size_t V = size_t(c.vocab_size);

        auto gpu = create_cuda_backend(c, w, 0, 0);
        auto cpu = create_cpu_backend(c, bf16_rounded(w), 2);

        // Token by token against the CPU engine holding the same bf16 weights: decode tolerance.
        {
            auto gs = gpu->create_state(limits(128));
            auto cs = cpu->create_state(limits(128));
            double worst = 0;
            for (int32_t t : prompt) worst = std::max(worst, max_rel(eval(*gpu, *gs, {t}, LogitsRows::Last), eval(*cpu, *cs, {t}, LogitsRows::Last)));
            MESSAGE(std::string(name) << ": token-by-token vs CPU (bf16 weights) rel err " << worst);
            CHECK(worst <= kDecodeTol);
        }
        // Block prefill, greedy decoding, chain and state against fla (fp32 weights).
        auto gs = gpu->create_state(limits(128));
        const auto logits = eval(*gpu, *gs, prompt, LogitsRows::All);
        const double ep = max_rel(logits, ex.f32("prefill_logits"));
        MESSAGE(std::string(name) << ": prefill logits vs fla rel err " << ep);
        CHECK(ep <= kFixtureTol);
        std::vector<int32_t> ours;
        ours.push_back(argmax(logits.data() + (prompt.size() - 1) * V, int32_t(V)));
        const auto step_want = ex.f32("greedy_step_logits");
        double es = 0;
        for (size_t i = 0; i + 1 < greedy.size(); ++i) {
            const auto row = eval(*gpu, *gs, {greedy[i]}, LogitsRows::Last);  // teacher-forced on fla's tokens
            es = std::max(es, max_rel(row.data(), step_want.data() + i * V, V));
            ours.push_back(argmax(row.data(), int32_t(V)));
        }
        MESSAGE(std::string(name) << ": greedy step logits vs fla rel err " << es);
        CHECK(es <= kFixtureTol);
        size_t same = 0;
        while (same < ours.size() && ours[same] == greedy[same]) ++same;
        MESSAGE(std::string(name) << ": greedy tokens equal to fla's for " << same << " of " << greedy.size());
        WARN(same == greedy.size());

        auto gs2 = gpu->create_state(limits(128));
        eval(*gpu, *gs2, prompt, LogitsRows::None);
        const auto chain = eval(*gpu, *gs2, ex.i32("chain_tokens"), LogitsRows::All);
        const double ec = max_rel(chain, ex.f32("chain_logits"));
        const double est = max_rel(state_of(*gpu, *gs2, 0), ex.f32("state_layer0_recurrent"));
        MESSAGE(std::string(name) << ": chain logits vs fla rel err " << ec << ", layer-0 state " << est);
        CHECK(ec <= kFixtureTol);
        CHECK(est <= kFixtureTol);
    }
}

TEST_CASE("cuda backend: device sampling equals the host sampler; graph replay equals eager launches") {
    CUDA_TEST_REQUIRE_GPU();
    const uint64_t seed = fresh_seed("backend sampling");
    std::mt19937_64 g(seed);
    const ModelConfig c = make_config(kShapes[0]);
    ModelWeights w = random_weights(c, g(), WeightType::BF16);
    CudaBackendOptions eager;
    eager.use_graph = false, eager.use_pdl = false;
    auto gpu = create_cuda_backend(c, w, 0, 0);
    auto ref = create_cuda_backend_ex(c, w, 0, eager);
    auto a = gpu->create_state(limits(32));
    auto b = ref->create_state(limits(32));
    const size_t V = size_t(c.vocab_size);
    std::vector<float> la(V), lb(V);
    int32_t tok = 7;
    SamplingConfig greedy;
    SamplingConfig warm;
    warm.temperature = 0.8f, warm.top_k = 40, warm.top_p = 0.9f;
    for (int step = 0; step < 20; ++step) {
        const bool sample = step % 2 == 1;
        const double u = std::uniform_real_distribution<double>(0, 1)(g);
        const SamplingConfig &sc = sample ? warm : greedy;
        const int32_t ta = gpu->decode_and_sample(*a, tok, sc, u, la.data());
        const int32_t tb = ref->decode_and_sample(*b, tok, sc, u, lb.data());
        CHECK(max_rel(la, lb) == 0.0);
        CHECK(ta == tb);
        CHECK(ta == sample_token(la.data(), int32_t(V), sc, u));
        tok = ta;
    }
    auto *cb = dynamic_cast<cuda::CudaBackend *>(gpu.get());
    REQUIRE(cb != nullptr);
    MESSAGE("decoding step mode: " << cb->decode_mode(*a));
    CHECK(cb->decode_mode(*a).find("eager") == std::string::npos);
    // Sequences are independent: a fresh state replays the same tokens to the same logits.
    auto a2 = gpu->create_state(limits(32));
    gpu->reset_state(*a);
    for (int32_t t : {3, 1, 4, 1, 5}) {
        CHECK(max_rel(eval(*gpu, *a, {t}, LogitsRows::Last), eval(*gpu, *a2, {t}, LogitsRows::Last)) == 0.0);
    }
}

TEST_CASE("cuda backend: out of memory leaves everything intact; bad device is reported") {
    CUDA_TEST_REQUIRE_GPU();
    const ModelConfig c = make_config(kShapes[2]);
    ModelWeights w = random_weights(c, 5, WeightType::BF16);
    // Budget for about one state of capacity 64.
    CudaBackendOptions probe_opts;
    auto probe = create_cuda_backend_ex(c, w, 0, probe_opts);
    size_t one_state = 0;
    {
        auto s = probe->create_state(limits(64));
        one_state = probe->memory_stats().arena_used_bytes;
    }
    CudaBackendOptions opts;
    opts.arena_block_bytes = one_state;
    opts.arena_budget_bytes = one_state + one_state / 2;
    auto gpu = create_cuda_backend_ex(c, w, 0, opts);
    auto s1 = gpu->create_state(limits(64));
    const MemoryStats before = gpu->memory_stats();
    CHECK(before.weight_bytes > 0);
    CHECK(before.live_allocations >= 2);
    try {
        auto s2 = gpu->create_state(limits(64));
        FAIL("expected SPECLA_ERR_OUT_OF_MEMORY");
    } catch (const Error &e) {
        CHECK(e.status() == SPECLA_ERR_OUT_OF_MEMORY);
        MESSAGE("OOM message: " << std::string(e.what()));
    }
    const MemoryStats after = gpu->memory_stats();
    CHECK(after.arena_used_bytes == before.arena_used_bytes);
    CHECK(after.live_allocations == before.live_allocations);
    // The surviving state still works and matches a state of an unconstrained backend.
    auto s3 = probe->create_state(limits(64));
    for (int32_t t : {1, 2, 3}) CHECK(max_rel(eval(*gpu, *s1, {t}, LogitsRows::Last), eval(*probe, *s3, {t}, LogitsRows::Last)) == 0.0);

    try {
        create_cuda_backend(c, w, 99, 0);
        FAIL("expected SPECLA_ERR_BACKEND_UNAVAILABLE");
    } catch (const Error &e) {
        CHECK(e.status() == SPECLA_ERR_BACKEND_UNAVAILABLE);
        MESSAGE("bad device message: " << std::string(e.what()));
    }
}

}  // namespace

#endif  // SPECLA_WITH_CUDA
