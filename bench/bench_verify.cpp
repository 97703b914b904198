// Speculative-verification benchmark at the engine level, on any backend, with random weights of
// a chosen shape. Every ratio is measured side by side in one run (medians of repeats):
//   P2  chain of 16 candidates verified in one pass vs one plain decoding step
//   P3  tree verification (hybrid, parallel WY) vs root-to-leaf replay (each path as its own pass
//       from a copy of the committed state) at top-k 4 / depth 4 / 32 nodes and top-k 2 / depth 12
//       / 16 nodes
//   P4  commit of 8 accepted tokens from factors vs token replay (the 8 tokens as one pass)
//   P5  verify + deferred commit vs verify + separate commit, per speculative step (the tree has one
//       root, as a session's: its pending token leads the draft); on CUDA also at kernel level:
//       the recurrence of every layer + the commit only (fused into the recurrence vs a separate
//       pass), which is what the deferred commit changes
//   P8  memory per session with a 16-node tree vs the plain-decoding state (and vs snapshots)
//
//   bench_verify [--shape gdn-1.3b|pycode|small] [--backend cpu|cuda] [--threads N] [--reps N]
//                [--only p2]     (the plain step and P2's chain of 16 alone: e.g. under a profiler)
//                [--json FILE]   (the table's rows, machine-readably: bench_json.h)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_json.h"
#include "engine/backend.h"
#include "engine/model.h"
#include "model/weights.h"
#ifdef SPECLA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "cuda_probe.h"
#endif

using namespace specla;

namespace {

using Clock = std::chrono::steady_clock;

ModelConfig shape_config(const std::string &shape) {
    ModelConfig c;
    if (shape == "gdn-1.3b") {
        c.vocab_size = 32000, c.hidden_size = 2048, c.num_layers = 24, c.num_heads = 8, c.num_v_heads = 8;
        c.head_k_dim = 256, c.head_v_dim = 256, c.conv_size = 4, c.intermediate_size = 5632;
    } else if (shape == "pycode") {
        c.vocab_size = 8192, c.hidden_size = 384, c.num_layers = 8, c.num_heads = 2, c.num_v_heads = 2;
        c.head_k_dim = 128, c.head_v_dim = 256, c.conv_size = 4, c.intermediate_size = 1024;
    } else if (shape == "small") {
        c.vocab_size = 512, c.hidden_size = 128, c.num_layers = 2, c.num_heads = 2, c.num_v_heads = 2;
        c.head_k_dim = 32, c.head_v_dim = 64, c.conv_size = 4, c.intermediate_size = 256;
    } else {
        std::fprintf(stderr, "unknown shape %s (gdn-1.3b, pycode, small)\n", shape.c_str());
        std::exit(2);
    }
    return c;
}

struct Tree {
    std::vector<int32_t> tokens, parents;
    void add(int32_t tok, int32_t parent) { tokens.push_back(tok), parents.push_back(parent); }
    int32_t size() const { return int32_t(tokens.size()); }
    std::vector<int32_t> path_to(int32_t v) const {
        std::vector<int32_t> p;
        for (; v >= 0; v = parents[size_t(v)]) p.push_back(v);
        return {p.rbegin(), p.rend()};
    }
    std::vector<int32_t> leaves() const {
        std::vector<char> has_child(tokens.size(), 0);
        for (int32_t p : parents)
            if (p >= 0) has_child[size_t(p)] = 1;
        std::vector<int32_t> out;
        for (int32_t i = 0; i < size(); ++i)
            if (!has_child[size_t(i)]) out.push_back(i);
        return out;
    }
};

// Breadth-first top-k expansion up to `depth`, truncated at `nodes`: the shape a top-k drafter
// builds before pruning.
Tree topk_tree(int k, int depth, int nodes, int32_t vocab) {
    Tree t;
    std::vector<int32_t> frontier = {-1};
    for (int d = 0; d < depth && t.size() < nodes; ++d) {
        std::vector<int32_t> next;
        for (int32_t p : frontier)
            for (int c = 0; c < k && t.size() < nodes; ++c) {
                t.add(int32_t((t.size() * 7919 + 13) % vocab), p);
                next.push_back(t.size() - 1);
            }
        frontier = next;
    }
    return t;
}

// A main chain of `depth` with k-1 alternatives at the first levels until `nodes`: the shape of a
// confident top-k 2 drafter (deep and thin).
Tree deep_tree(int k, int depth, int nodes, int32_t vocab) {
    Tree t;
    int32_t prev = -1;
    std::vector<int32_t> chain;
    for (int d = 0; d < depth; ++d) {
        t.add(int32_t((d * 104729 + 7) % vocab), prev);
        prev = t.size() - 1;
        chain.push_back(prev);
    }
    for (int d = 0; t.size() < nodes && d < depth; ++d)
        for (int c = 1; c < k && t.size() < nodes; ++c)
            t.add(int32_t((t.size() * 31 + 5) % vocab), d == 0 ? -1 : chain[size_t(d - 1)]);
    return t;
}

double median_ms(int reps, const std::function<void()> &fn, const std::function<void()> &sync) {
    std::vector<double> v;
    fn();  // warm-up
    sync();
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        fn();
        sync();
        v.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
    }
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    std::string shape = "pycode", backend = "cpu";
    int threads = 0, reps = 20;
    bool only_p2 = false;
    for (int i = 1; i < argc; ++i) {
        auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
        if (!std::strcmp(argv[i], "--shape")) shape = next();
        else if (!std::strcmp(argv[i], "--backend")) backend = next();
        else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(next());
        else if (!std::strcmp(argv[i], "--reps")) reps = std::atoi(next());
        else if (!std::strcmp(argv[i], "--only") && !std::strcmp(next(), "p2")) only_p2 = true;
        else if (!std::strcmp(argv[i], "--json")) next();  // read by bench::JsonReport
        else {
            std::fprintf(stderr, "usage: %s [--shape gdn-1.3b|pycode|small] [--backend cpu|cuda] [--threads N] [--reps N] [--only p2] [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    const ModelConfig cfg = shape_config(shape);
    ModelOptions opts;
    opts.backend = backend == "cuda" ? SPECLA_BACKEND_CUDA : SPECLA_BACKEND_CPU;
    opts.n_threads = threads;
    std::shared_ptr<Model> model;
    try {
        model = Model::from_weights(cfg, random_weights(cfg, 42, WeightType::BF16), opts);
    } catch (const std::exception &e) {
        std::fprintf(stderr, "cannot build the model: %s\n", e.what());
        return 1;
    }
    Backend &be = model->backend();
    const int32_t vocab = cfg.vocab_size;
    SessionLimits lim;
    lim.max_tree_nodes = 32;
    lim.max_batch_tokens = 64;
    auto base = be.create_state(lim), work = be.create_state(lim);
    auto sync = [&] { be.synchronize(*work); };
    std::vector<int32_t> prompt(64);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int32_t((i * 2654435761u) % uint32_t(vocab));
    be.eval_chain(*base, prompt.data(), int32_t(prompt.size()), LogitsRows::None, nullptr);
    std::vector<float> logits(size_t(64) * vocab);
    std::vector<int32_t> argmax(64);
    VerifyOutputs greedy_out;
    greedy_out.argmax = argmax.data();

    bench::JsonReport json(argc, argv);
    json.set_device(backend);
#ifdef SPECLA_WITH_CUDA
    if (auto *cb = dynamic_cast<cuda::CudaBackend *>(&be)) {
        cudaDeviceProp prop{};
        if (cudaGetDeviceProperties(&prop, cb->device()) == cudaSuccess)
            json.set_device(std::string(prop.name) + ", " + std::to_string(prop.multiProcessorCount) + " SMs");
    }
#endif
    // A row in the JSON report: the measure as the table names it (plus the shape), in ms unless said.
    auto row = [&](const std::string &measure, double value, const char *unit = "ms", const std::string &note = "") {
        json.add(measure + " [" + shape + "]", value, unit, note);
    };
    std::printf("shape %s, backend %s, reps %d (median ms)\n", shape.c_str(), backend.c_str(), reps);
    std::printf("| measure | ms | ratio | target |\n|---|---|---|---|\n");

    // P2: one plain step vs a 16-candidate chain, both on a copy of the same state.
    be.copy_state(*base, *work);
    int32_t tok = prompt.back();
    const double step = median_ms(reps, [&] { tok = be.decode_and_sample(*work, tok, SamplingConfig{}, 0.5, nullptr); }, sync);
    Tree chain16;
    for (int i = 0; i < 16; ++i) chain16.add(int32_t((i * 37 + 11) % vocab), i - 1);
    be.copy_state(*base, *work);
    const double ver16 = median_ms(reps, [&] {
        be.verify_tree(*work, chain16.tokens.data(), chain16.parents.data(), 16, TreeAlgorithm::Auto, greedy_out);
    }, sync);
    std::printf("| plain decode step | %.3f | | |\n", step);
    std::printf("| P2 chain of 16 verified in one pass | %.3f | %.2fx a step | <= 1.2x |\n", ver16, ver16 / step);
    row("plain decode step", step);
    row("P2 chain of 16 verified in one pass", ver16);
    row("P2 chain of 16 / plain step", ver16 / step, "ratio", "target <= 1.2");
    if (only_p2) return 0;
    // The pass by chain length: what a pass costs whatever its rows (the intercept: launches,
    // host work, the weight stream once) against what each row adds (the slope), the two halves
    // of P2's ratio.
    double ver1 = 0;
    for (int32_t n : {1, 2, 4, 8}) {
        be.copy_state(*base, *work);
        const double ms = median_ms(reps, [&] {
            be.verify_tree(*work, chain16.tokens.data(), chain16.parents.data(), n, TreeAlgorithm::Auto, greedy_out);
        }, sync);
        if (n == 1) ver1 = ms;
        std::printf("| chain of %d verified in one pass | %.3f | %.2fx a step | |\n", n, ms, ms / step);
        row("chain of " + std::to_string(n) + " verified in one pass", ms);
    }
    std::printf("| verification pass: per node ((16-node - 1-node) / 15), intercept (1-node - slope) | %.4f, %.3f | "
                "%.2fx, %.2fx a step | |\n",
                (ver16 - ver1) / 15, ver1 - (ver16 - ver1) / 15, (ver16 - ver1) / 15 / step,
                (ver1 - (ver16 - ver1) / 15) / step);

    // P3: tree verification vs root-to-leaf replay.
    struct Case { const char *name; Tree t; double target; };
    std::vector<Case> cases = {{"top-k 4 / depth 4 / 32 nodes", topk_tree(4, 4, 32, vocab), 8.0},
                               {"top-k 2 / depth 12 / 16 nodes", deep_tree(2, 12, 16, vocab), 2.5}};
    for (const Case &c : cases) {
        const Tree &t = c.t;
        be.copy_state(*base, *work);
        double best = 1e30;
        for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
            const double ms = median_ms(reps, [&] {
                be.verify_tree(*work, t.tokens.data(), t.parents.data(), t.size(), a, greedy_out);
            }, sync);
            std::printf("| P3 %s, %s (%d nodes) | %.3f | | |\n", c.name, a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY",
                        t.size(), ms);
            row(std::string("P3 ") + c.name + ", " + (a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY"), ms);
            best = std::min(best, ms);
        }
        const auto leaves = t.leaves();
        const double replay = median_ms(std::max(3, reps / 4), [&] {
            for (int32_t leaf : leaves) {
                be.copy_state(*base, *work);
                const auto path = t.path_to(leaf);
                std::vector<int32_t> toks;
                for (int32_t v : path) toks.push_back(t.tokens[size_t(v)]);
                be.eval_chain(*work, toks.data(), int32_t(toks.size()), LogitsRows::All, logits.data());
            }
        }, sync);
        std::printf("| P3 %s, root-to-leaf replay (%zu paths) | %.3f | %.2fx (best tree / replay) | >= %.1fx |\n", c.name,
                    leaves.size(), replay, replay / best, c.target);
        row(std::string("P3 ") + c.name + ", root-to-leaf replay", replay, "ms", std::to_string(leaves.size()) + " paths");
        row(std::string("P3 ") + c.name + ", replay / best tree", replay / best, "ratio",
            "target >= " + std::to_string(c.target).substr(0, 3));
    }

    // P4: commit 8 accepted tokens from factors vs replaying them.
    Tree chain8;
    for (int i = 0; i < 8; ++i) chain8.add(int32_t((i * 53 + 3) % vocab), i - 1);
    const std::vector<int32_t> path8 = {0, 1, 2, 3, 4, 5, 6, 7};
    std::vector<double> commit_ms, replay_ms;
    for (int r = 0; r <= reps; ++r) {
        be.copy_state(*base, *work);
        be.verify_tree(*work, chain8.tokens.data(), chain8.parents.data(), 8, TreeAlgorithm::Auto, greedy_out);
        sync();
        auto t0 = Clock::now();
        be.commit_path(*work, path8.data(), 8, /*deferred=*/false);
        sync();
        const double c_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        be.copy_state(*base, *work);
        sync();
        t0 = Clock::now();
        be.eval_chain(*work, chain8.tokens.data(), 8, LogitsRows::None, nullptr);
        sync();
        const double r_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
        if (r) commit_ms.push_back(c_ms), replay_ms.push_back(r_ms);
    }
    std::sort(commit_ms.begin(), commit_ms.end());
    std::sort(replay_ms.begin(), replay_ms.end());
    const double cm = commit_ms[commit_ms.size() / 2], rm = replay_ms[replay_ms.size() / 2];
    std::printf("| P4 commit of 8 tokens from factors | %.3f | | |\n", cm);
    std::printf("| P4 token replay of the same 8 | %.3f | %.2fx (replay / commit) | >= 5x |\n", rm, rm / cm);
    row("P4 commit of 8 tokens from factors", cm);
    row("P4 token replay of the same 8", rm);
    row("P4 replay / commit", rm / cm, "ratio", "target >= 5");

    // P4 as framed: the commit against the state's memory floor, one read and one write of the
    // state, measured as a state copy (copy_state reads the recurrent state and conv cache once and
    // writes them once; the commit reads and writes the recurrent state and reads the factors).
    auto other = be.create_state(lim);
    be.copy_state(*base, *work);
    const double floor_ms = median_ms(reps, [&] { be.copy_state(*work, *other); }, [&] { be.synchronize(*other); });
    std::printf("| P4 memory floor: the state read and written once (a state copy) | %.3f | %.2fx (commit / floor) | <= 1.5x |\n",
                floor_ms, cm / floor_ms);
    row("P4 memory floor (state copy)", floor_ms);
    row("P4 commit / memory floor", cm / floor_ms, "ratio", "target <= 1.5");

    // P5: a speculative step = verify a 16-node tree + commit a 4-token path; deferred commit fuses
    // the state update into the next verification. Like a session's trees, this one has a single
    // root (the session's pending token leads every draft), so the fused path applies.
    Tree t16;
    t16.add(int32_t(17 % vocab), -1);
    {
        const Tree sub = topk_tree(2, 4, 15, vocab);
        for (int32_t i = 0; i < sub.size(); ++i) t16.add(sub.tokens[size_t(i)], sub.parents[size_t(i)] + 1);
    }
    const std::vector<int32_t> path4 = t16.path_to(t16.size() - 1);
    double step_ms[2];
    for (int deferred = 0; deferred < 2; ++deferred) {
        be.copy_state(*base, *work);
        step_ms[deferred] = median_ms(reps, [&] {
            be.verify_tree(*work, t16.tokens.data(), t16.parents.data(), t16.size(), TreeAlgorithm::Auto, greedy_out);
            be.commit_path(*work, path4.data(), int32_t(path4.size()), deferred == 1);
        }, sync);
    }
    std::printf("| P5 verify + separate commit, per step | %.3f | | |\n", step_ms[0]);
    std::printf("| P5 verify + deferred commit, per step | %.3f | %.2fx (separate / deferred) | >= 1.5x |\n", step_ms[1],
                step_ms[0] / step_ms[1]);
    row("P5 verify + separate commit, per step", step_ms[0]);
    row("P5 verify + deferred commit, per step", step_ms[1]);
    row("P5 separate / deferred", step_ms[0] / step_ms[1], "ratio", "target >= 1.5");
    // P5 as framed: the same verification pass on a state with a deferred commit pending (the
    // pass applies it where it loads the state) and on a state whose commit was applied before.
    double pass_ms[2];
    for (int pending = 0; pending < 2; ++pending) {
        std::vector<double> times;
        for (int r = 0; r <= reps; ++r) {
            be.copy_state(*base, *work);
            be.verify_tree(*work, t16.tokens.data(), t16.parents.data(), t16.size(), TreeAlgorithm::Auto, greedy_out);
            be.commit_path(*work, path4.data(), int32_t(path4.size()), /*deferred=*/pending == 1);
            sync();
            const auto t0 = Clock::now();
            be.verify_tree(*work, t16.tokens.data(), t16.parents.data(), t16.size(), TreeAlgorithm::Auto, greedy_out);
            sync();
            if (r) times.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        }
        std::sort(times.begin(), times.end());
        pass_ms[pending] = times[times.size() / 2];
    }
    std::printf("| P5 verification pass, nothing pending | %.3f | | |\n", pass_ms[0]);
    std::printf("| P5 the same pass applying a pending 4-token commit | %.3f | %.3fx (pending / none) | <= 1.01x |\n",
                pass_ms[1], pass_ms[1] / pass_ms[0]);
    row("P5 verification pass, nothing pending", pass_ms[0]);
    row("P5 the same pass applying a pending commit", pass_ms[1]);
    row("P5 pending / none", pass_ms[1] / pass_ms[0], "ratio", "target <= 1.01");
#ifdef SPECLA_WITH_CUDA
    if (auto *cb = dynamic_cast<cuda::CudaBackend *>(&be)) {
        // Kernel level: the state work of a step only (recurrence of every layer over the tree +
        // commit of the path), device time between events.
        for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
            be.copy_state(*base, *work);
            be.verify_tree(*work, t16.tokens.data(), t16.parents.data(), t16.size(), a, greedy_out);
            const float sep = cuda::CudaBackendProbe::time_recurrence_commit(*cb, *work, path4.data(), int32_t(path4.size()), false, a, reps);
            const float fused = cuda::CudaBackendProbe::time_recurrence_commit(*cb, *work, path4.data(), int32_t(path4.size()), true, a, reps);
            const char *an = a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY";
            std::printf("| P5 kernels: recurrence (%s) + separate commit | %.3f | | |\n", an, sep);
            std::printf("| P5 kernels: recurrence (%s) with the commit fused | %.3f | %.2fx (separate / fused) | >= 1.5x |\n",
                        an, fused, sep / fused);
            row(std::string("P5 kernels: recurrence (") + an + ") + separate commit", sep);
            row(std::string("P5 kernels: recurrence (") + an + ") with the commit fused", fused);
            row(std::string("P5 kernels: recurrence (") + an + ") separate / fused", sep / fused, "ratio", "target >= 1.5");
        }
        // Chain recurrence alone, by chain length: P2's 16 candidates are a 17-node chain (root +
        // 16); the slope between lengths is the per-node cost of the chain kernel (issue target:
        // about 0.3 us per node and layer at GDN-1.3B), the intercept its per-layer fixed cost
        // (state tile in and out, launch).
        const std::vector<int32_t> none;
        float hybrid_ms[2] = {0.f, 0.f};
        const int32_t lengths[] = {1, 5, 9, 17, 32};
        for (const int32_t len : lengths) {
            if (len > lim.max_tree_nodes) continue;
            Tree chain;
            for (int i = 0; i < len; ++i) chain.add(int32_t((i * 41 + 7) % vocab), i - 1);
            be.copy_state(*base, *work);
            be.verify_tree(*work, chain.tokens.data(), chain.parents.data(), len, TreeAlgorithm::Hybrid, greedy_out);
            for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
                if (a == TreeAlgorithm::ParallelWY && len != 17) continue;
                const float ms = cuda::CudaBackendProbe::time_recurrence_commit(*cb, *work, none.data(), 0, true, a, reps);
                const std::string name = "kernels: recurrence of a " + std::to_string(len) + "-node chain, all layers, " +
                                         (a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY");
                std::printf("| %s | %.3f | | |\n", name.c_str(), ms);
                row(name, ms);
                if (a == TreeAlgorithm::Hybrid && len == 1) hybrid_ms[0] = ms;
                if (a == TreeAlgorithm::Hybrid && len == 17) hybrid_ms[1] = ms;
            }
        }
        if (hybrid_ms[1] > 0.f) {
            const double us = 1e3 * double(hybrid_ms[1] - hybrid_ms[0]) / (16.0 * cfg.num_layers);
            std::printf("| kernels: chain recurrence per node and layer ((17-node - 1-node) / 16 / layers) | %.3f us | | ~0.3 us |\n", us);
            row("kernels: chain recurrence per node and layer", us, "us", "target ~0.3");
        }
        for (const Case &c : cases) {
            be.copy_state(*base, *work);
            be.verify_tree(*work, c.t.tokens.data(), c.t.parents.data(), c.t.size(), TreeAlgorithm::Hybrid, greedy_out);
            for (TreeAlgorithm a : {TreeAlgorithm::Hybrid, TreeAlgorithm::ParallelWY}) {
                const float ms = cuda::CudaBackendProbe::time_recurrence_commit(*cb, *work, none.data(), 0, true, a, reps);
                std::printf("| kernels: recurrence of %s, all layers, %s | %.3f | | |\n", c.name,
                            a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY", ms);
                row(std::string("kernels: recurrence of ") + c.name + ", all layers, " +
                        (a == TreeAlgorithm::Hybrid ? "hybrid" : "parallel WY"), ms);
            }
        }
    }
#endif

    // P6 (drafting side): the cost of an EAGLE drafter of this shape (one GDN layer + fc, the
    // target's embeddings, final norm and output head; random weights) as EagleDrafter runs it
    // (spec/eagle_drafter.md): a catch-up chain over the accepted tokens with the target's features,
    // then one pass per tree level over the rows drafted so far, whose newest level's logits and
    // features come back to the host. Then the speedup those measured costs give with an acceptance
    // profile that is not this shape's own (there is no trained drafter at this shape): the demo
    // pair's (gdn-pycode-22m + its drafter on the eval prompts, <= 16 nodes: 3.03 tokens and 6.2
    // nodes per pass; bench/journal/2026-12-02-eagle-drafter-first-measurements.md), assuming 3
    // levels of 4 nodes drawn per pass.
    {
        ModelConfig dcfg = cfg;
        dcfg.num_layers = 1;
        // The layer's weights only: the embeddings and head are the target's (a one-token
        // vocabulary keeps random_weights from filling vocab-sized matrices that are dropped).
        ModelConfig layer_only = dcfg;
        layer_only.vocab_size = 1;
        ModelWeights own = random_weights(layer_only, 7, WeightType::BF16);
        own.embeddings = Matrix();
        own.lm_head = Matrix();
        own.fc = random_matrix(cfg.hidden_size, 2 * int64_t(cfg.hidden_size), WeightType::BF16,
                               std::sqrt(3.0f / float(2 * cfg.hidden_size)), 11);
        std::unique_ptr<Backend> drafter;
        try {
            drafter = be.create_drafter_backend(dcfg, std::move(own));
        } catch (const std::exception &e) {
            std::printf("| P6 drafting cost | skipped: %s | | |\n", e.what());
        }
        if (drafter) {
            const size_t D = size_t(cfg.hidden_size);
            auto dst = drafter->create_state(lim);
            auto dsync = [&] { drafter->synchronize(*dst); };
            std::vector<float> feat_in(64 * D, 0.01f), feat_out(64 * D), dlogits(size_t(4) * vocab);
            std::vector<int32_t> toks(64);
            for (size_t i = 0; i < toks.size(); ++i) toks[i] = int32_t((i * 7919 + 5) % uint32_t(vocab));
            RowFeatures rf;
            rf.in = feat_in.data();
            rf.out = feat_out.data();
            drafter->eval_chain(*dst, toks.data(), 16, LogitsRows::None, nullptr, rf);  // some context
            const double catchup = median_ms(reps, [&] {
                drafter->eval_chain(*dst, toks.data(), 3, LogitsRows::Last, dlogits.data(), rf);
            }, dsync);
            std::printf("| P6 drafter catch-up over 3 accepted tokens | %.3f | %.2fx a step | |\n", catchup, catchup / step);
            row("P6 drafter catch-up over 3 accepted tokens", catchup);
            double levels_ms = 0;
            for (int level = 1; level <= 4; ++level) {
                // Levels of 4 nodes, each level's nodes children of one node of the level before.
                Tree t;
                for (int l = 0; l < level; ++l)
                    for (int c = 0; c < 4; ++c) t.add(int32_t((l * 4 + c) * 131 % vocab), l == 0 ? -1 : (l - 1) * 4);
                VerifyOutputs vo;
                vo.logits = dlogits.data();
                vo.features.in = feat_in.data();
                vo.features.out = feat_out.data();
                vo.first_row = t.size() - 4;
                const double ms = median_ms(reps, [&] {
                    drafter->verify_tree(*dst, t.tokens.data(), t.parents.data(), t.size(), TreeAlgorithm::Auto, vo);
                }, dsync);
                if (level <= 3) levels_ms += ms;
                std::printf("| P6 drafter level %d pass (%d rows, 4 returned) | %.3f | %.2fx a step | |\n", level, t.size(), ms,
                            ms / step);
                row("P6 drafter level " + std::to_string(level) + " pass", ms);
                if (level != 2) continue;
                // What greedy drafting takes of the rows instead: their top 4 tokens (no vocab-sized
                // rows to the host, nor a softmax and a sort over them there).
                std::vector<int32_t> top_ids(16);
                std::vector<float> top_logp(16);
                vo.logits = nullptr;
                vo.top.k = 4;
                vo.top.n_candidates = vocab;
                vo.top.ids = top_ids.data();
                vo.top.logp = top_logp.data();
                const double top_ms = median_ms(reps, [&] {
                    drafter->verify_tree(*dst, t.tokens.data(), t.parents.data(), t.size(), TreeAlgorithm::Auto, vo);
                }, dsync);
                std::printf("| P6 drafter level 2 pass returning each row's top 4 tokens | %.3f | %.2fx a step | |\n",
                            top_ms, top_ms / step);
                row("P6 drafter level 2 pass, top 4 tokens", top_ms);
            }
            Tree t7 = topk_tree(3, 3, 7, vocab);
            be.copy_state(*base, *work);
            const double ver7 = median_ms(reps, [&] {
                be.verify_tree(*work, t7.tokens.data(), t7.parents.data(), t7.size(), TreeAlgorithm::Auto, greedy_out);
            }, sync);
            const double pass = ver7 + catchup + levels_ms, tokens = 3.03;
            std::printf("| P6 target verification of 7 nodes | %.3f | %.2fx a step | |\n", ver7, ver7 / step);
            std::printf("| P6 projected speedup: 3.03 tokens per %.3f ms pass (verify 7 + catch-up + 3 levels) | %.3f | %.2fx plain | >= 2.5x |\n",
                        pass, pass, tokens * step / pass);
            row("P6 target verification of 7 nodes", ver7);
            row("P6 projected speedup with the demo pair's acceptance", tokens * step / pass, "ratio",
                "target >= 2.5; acceptance profile borrowed from gdn-pycode-22m, 3 levels assumed");
        }
    }

    // P8: memory of one session prepared for 16-node trees.
    SessionLimits lim16;
    lim16.max_tree_nodes = 16;
    lim16.max_batch_tokens = 16;
    auto s16 = be.create_state(lim16);
    const SessionMemory m = be.session_memory(*s16);
    if (m.state_bytes) {
        const double ratio = double(m.state_bytes + m.factor_bytes) / double(m.state_bytes);
        std::printf("| P8 plain-decoding state | %.2f MiB | | |\n", double(m.state_bytes) / 1048576.0);
        std::printf("| P8 state + factors for 16 nodes | %.2f MiB | %.3fx the state (snapshots: 17x) | <= 1.1x |\n",
                    double(m.state_bytes + m.factor_bytes) / 1048576.0, ratio);
        std::printf("| activation scratch (not state) | %.2f MiB | | |\n", double(m.scratch_bytes) / 1048576.0);
        std::printf("| P8 baseline: per-node state snapshots for 16 nodes | %.2f MiB | 17x the state | |\n",
                    17.0 * double(m.state_bytes) / 1048576.0);
        row("P8 plain-decoding state", double(m.state_bytes) / 1048576.0, "MiB");
        row("P8 state + factors for 16 nodes", double(m.state_bytes + m.factor_bytes) / 1048576.0, "MiB");
        row("P8 state + factors / state", ratio, "ratio", "target <= 1.1");
        row("activation scratch (not state)", double(m.scratch_bytes) / 1048576.0, "MiB");
    }
    return json.write() ? 0 : 1;
}
