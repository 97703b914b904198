// The persistent decoding step against the engine's kernel-per-op step, side by side on one copy of
// random GDN-1.3B weights (the shape of bench_decode): ms per step between CUDA events around
// graph replays, median of --repeats; then the persistent step's phase timeline (per phase
// boundary, us from the layer's first start, mean and latest CTA, middle layers of one step).
// The rows bench_decode printed for this step before it left the product.
//
//   bench_persistent_step [--repeats N] [--steps N] [--json FILE]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "bench_json.h"
#include "cuda_probe.h"
#include "persistent_step.h"
#include "util/error.h"

using namespace specla;

namespace {

void ck(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fail(SPECLA_ERR_DEVICE, what, ": ", cudaGetErrorString(e));
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

ModelConfig gdn_1p3b() {
    ModelConfig c;
    c.vocab_size = 32000, c.hidden_size = 2048, c.num_layers = 24, c.num_heads = 8, c.num_v_heads = 8;
    c.head_k_dim = 256, c.head_v_dim = 256, c.conv_size = 4, c.intermediate_size = 5632, c.norm_eps = 1e-6f;
    c.use_gate = true, c.use_short_conv = true, c.allow_neg_eigval = false, c.tie_word_embeddings = false;
    c.bos_token_id = 1, c.eos_token_id = 2;
    return c;
}

void prompt(cuda::CudaBackend &b, SequenceState &s) {
    std::vector<int32_t> warm(16);
    for (size_t i = 0; i < warm.size(); ++i) warm[i] = int32_t((i * 2654435761u) % uint32_t(b.config().vocab_size));
    std::vector<float> logits(size_t(b.config().vocab_size));
    b.eval_chain(s, warm.data(), int32_t(warm.size()), LogitsRows::Last, logits.data());
}

void print_timeline(cuda::CudaBackend &b) {
    const ModelConfig &c = b.config();
    const int G = b.sm_count(), L = c.num_layers, E = kern::kDecodeTraceEvents;
    const size_t n = size_t(G) * size_t(L) * size_t(E);
    unsigned long long *d = nullptr;
    ck(cudaMalloc(reinterpret_cast<void **>(&d), n * 8), "malloc trace");
    ck(cudaMemset(d, 0, n * 8), "memset trace");
    {
        SessionLimits lim;
        auto s = b.create_state(lim);
        experiments::PersistentStep p(b, *s, /*use_graph=*/false);
        p.set_trace(d);
        for (int i = 0; i < 4; ++i) p.step(i, nullptr);
    }
    std::vector<unsigned long long> t(n);
    ck(cudaMemcpy(t.data(), d, n * 8, cudaMemcpyDeviceToHost), "copy trace");
    cudaFree(d);
    const char *names[kern::kDecodeTraceEvents] = {"layer start", "in_proj rows start", "in_proj rows end",
                                                   "recurrent start", "recurrent end", "o_proj start",
                                                   "o_proj rows start", "o_proj rows end", "gate_up start",
                                                   "gate_up rows start", "gate_up rows end", "down start",
                                                   "down rows end", "layer end", "o_proj inputs loaded",
                                                   "o_proj head sums done", "producer: in_proj issued",
                                                   "producer: o_proj issued", "producer: gate_up issued",
                                                   "producer: down issued", "recurrent inputs arrived",
                                                   "recurrent first tile done"};
    std::printf("\npersistent step timeline (us from the layer's first start; mean / latest CTA; layers 1..%d)\n",
                L - 2);
    for (int e = 0; e < E; ++e) {
        if (!names[e] || !names[e][0]) continue;
        double mean = 0, late = 0;
        int cnt = 0;
        for (int l = 1; l + 1 < L; ++l) {
            unsigned long long t0 = ~0ull;
            for (int g = 0; g < G; ++g) t0 = std::min(t0, t[(size_t(g) * L + l) * E + 0]);
            double m = 0, mx = 0;
            for (int g = 0; g < G; ++g) {
                const double v = double(t[(size_t(g) * L + l) * E + e]) - double(t0);
                m += v, mx = std::max(mx, v);
            }
            mean += m / G, late += mx, ++cnt;
        }
        std::printf("  %-28s %8.2f %8.2f\n", names[e], mean / cnt / 1e3, late / cnt / 1e3);
    }
}

}  // namespace

int main(int argc, char **argv) {
    bench::JsonReport json(argc, argv);
    int repeats = 7, steps = 128;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
        else if (a == "--steps" && i + 1 < argc) steps = std::max(1, std::atoi(argv[++i]));
        else if (a == "--json" && i + 1 < argc) ++i;
        else {
            std::fprintf(stderr, "usage: %s [--repeats N] [--steps N] [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    try {
        int n = 0;
        if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
            std::printf("bench_persistent_step: no GPU\n");
            return 1;
        }
        cudaDeviceProp prop{};
        ck(cudaGetDeviceProperties(&prop, 0), "properties");
        json.set_device(std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs");
        const ModelConfig c = gdn_1p3b();
        const ModelWeights w = random_weights(c, 1234, WeightType::BF16);
        auto backend = create_cuda_backend_ex(c, w, 0, CudaBackendOptions{});
        auto &b = dynamic_cast<cuda::CudaBackend &>(*backend);
        if (!experiments::PersistentStep::supported(b)) {
            std::printf("the persistent step does not cover GDN-1.3B on %s\n", prop.name);
            return 1;
        }
        SessionLimits lim;
        lim.max_batch_tokens = 64;
        auto ps = b.create_state(lim), fs = b.create_state(lim);
        prompt(b, *ps);
        prompt(b, *fs);
        experiments::PersistentStep fused(b, *fs);
        cuda::CudaBackendProbe::time_decode_steps(b, *ps, 5, 8);  // warm-up: eager step, capture, a few replays
        fused.time_steps(5, 8);
        std::vector<double> tp, tf;
        for (int r = 0; r < repeats; ++r) {
            tp.push_back(cuda::CudaBackendProbe::time_decode_steps(b, *ps, 5, steps) / steps);
            tf.push_back(fused.time_steps(5, steps) / steps);
        }
        std::printf("== GDN-1.3B, random bf16 weights, %s: ms per decoding step (median of %d x %d steps)\n",
                    prop.name, repeats, steps);
        const double mp = median(tp), mf = median(tf);
        std::printf("  %-44s %8.4f ms  %7.1f tokens/s\n", ("kernel per op [" + b.decode_mode(*ps) + "]").c_str(), mp,
                    1000.0 / mp);
        std::printf("  %-44s %8.4f ms  %7.1f tokens/s\n", ("persistent step [" + fused.mode() + "]").c_str(), mf,
                    1000.0 / mf);
        json.add("1.3B decode [kernel per op, " + b.decode_mode(*ps) + "] ms/step (events)", mp, "ms");
        json.add("1.3B decode [persistent step, " + fused.mode() + "] ms/step (events)", mf, "ms");
        print_timeline(b);
    } catch (const Error &e) {
        std::fprintf(stderr, "bench_persistent_step: %s\n", e.what());
        return 1;
    }
    return json.write() ? 0 : 1;
}
