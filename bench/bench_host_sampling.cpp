// The host's share of a sampled speculative pass: what the sampler, the sampled tree builder and
// sampled acceptance cost per row on this CPU, at a vocabulary size (the host runs them for every
// drafted row of a sampled EAGLE tree and every verified row its acceptance reaches, on any
// backend, whenever the draft carries its distributions).
//
//   bench_host_sampling [--vocab N[,N...]] [--temperature T] [--reps N] [--json FILE]
//
// Rows of random logits (normal, sd 3); the tree builder drafts <= 16 nodes, top-k 4, from those
// rows (its draws do not depend on what the rows mean); acceptance walks that tree.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "bench_json.h"
#include "sampling/sampler.h"
#include "spec/accept.h"
#include "spec/tree_builder.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class F>
double median_us(int reps, int inner, F f) {
    std::vector<double> t;
    for (int r = 0; r < reps; ++r) {
        const auto t0 = Clock::now();
        for (int i = 0; i < inner; ++i) f(i);
        t.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / inner);
    }
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

}  // namespace

int main(int argc, char **argv) {
    std::vector<int> vocabs = {8192, 32000};
    float temperature = 0.8f;
    int reps = 5;
    for (int i = 1; i < argc; ++i) {
        auto next = [&] { return i + 1 < argc ? argv[++i] : ""; };
        if (!std::strcmp(argv[i], "--vocab")) {
            vocabs.clear();
            std::stringstream list(next());
            std::string item;
            while (std::getline(list, item, ','))
                if (!item.empty()) vocabs.push_back(std::atoi(item.c_str()));
        } else if (!std::strcmp(argv[i], "--temperature")) temperature = std::strtof(next(), nullptr);
        else if (!std::strcmp(argv[i], "--reps")) reps = std::max(1, std::atoi(next()));
        else if (!std::strcmp(argv[i], "--json")) next();
        else {
            std::fprintf(stderr, "usage: %s [--vocab N[,N...]] [--temperature T] [--reps N] [--json FILE]\n", argv[0]);
            return 2;
        }
    }
    using namespace specla;
    bench::JsonReport json(argc, argv);
    json.set_device("host CPU, one thread");
    std::printf("| measure | us |\n|---|---|\n");
    for (int V : vocabs) {
        constexpr int kRows = 32;
        std::mt19937 g(1);
        std::normal_distribution<float> nd(0.f, 3.f);
        std::vector<float> logits(size_t(V) * kRows), probs(size_t(V) * kRows);
        for (float &x : logits) x = nd(g);
        SamplingConfig sc;
        sc.temperature = temperature;
        const double dist = median_us(reps, 200, [&](int i) {
            const size_t r = size_t(i % kRows) * size_t(V);
            sampling_distribution(logits.data() + r, V, sc, probs.data() + r);
        });
        for (int r = 0; r < kRows; ++r)
            sampling_distribution(logits.data() + size_t(r) * V, V, sc, probs.data() + size_t(r) * V);
        SamplingConfig top = sc;
        top.top_k = 40;
        top.top_p = 0.95f;
        // The cut configurations write into a row of their own (probs keeps T alone's rows for the
        // builder below), allocated once, as `dist` writes into probs.
        std::vector<float> cut_row(static_cast<size_t>(V));
        const double dist_cut = median_us(reps, 50, [&](int i) {
            sampling_distribution(logits.data() + size_t(i % kRows) * V, V, top, cut_row.data());
        });
        SamplingConfig nucleus = sc;
        nucleus.top_p = 0.95f;
        const double dist_p = median_us(reps, 20, [&](int i) {
            sampling_distribution(logits.data() + size_t(i % kRows) * V, V, nucleus, cut_row.data());
        });
        Rng rng(5);
        TreeParams tp;
        tp.max_nodes = 16, tp.max_depth = 8, tp.top_k = 4, tp.size_from_cost = false;
        TreeBuilder builder;
        DraftTree tree;
        std::vector<int32_t> node_candidate;
        int64_t nodes = 0, builds = 0;
        const double build = median_us(reps, 20, [&](int) {
            builder.start(tp, probs.data(), V, &rng);
            for (int level = 1; !builder.frontier().empty(); ++level) {
                // Every frontier node's row: the level's own row of the 32 (the draws do not care).
                std::vector<float> rows;
                for (size_t f = 0; f < builder.frontier().size(); ++f)
                    rows.insert(rows.end(), probs.begin() + size_t(level % kRows) * V,
                                probs.begin() + size_t(level % kRows + 1) * V);
                builder.expand(rows.data(), V);
            }
            builder.finish(nullptr, tree, node_candidate);
            nodes += tree.size(), ++builds;
        });
        std::vector<float> node_logits(size_t(tree.size()) * V);
        for (size_t i = 0; i < node_logits.size(); ++i) node_logits[i] = logits[i % logits.size()];
        const double accept = median_us(reps, 50, [&](int) {
            (void)accept_sampled(tree, logits.data(), node_logits.data(), V, sc, rng);
        });
        const std::string v = " [vocab " + std::to_string(V) + "]";
        const double per_tree = double(nodes) / double(std::max<int64_t>(builds, 1));
        std::printf("| sampling_distribution, T=%.2f, one row%s | %.1f |\n", temperature, v.c_str(), dist);
        std::printf("| sampling_distribution, T=%.2f top-k 40 top-p 0.95, one row%s | %.1f |\n", temperature, v.c_str(),
                    dist_cut);
        std::printf("| sampling_distribution, T=%.2f top-p 0.95 alone, one row%s | %.1f |\n", temperature, v.c_str(), dist_p);
        std::printf("| sampled tree builder, <= 16 nodes, top-k 4 (%.1f nodes)%s | %.1f |\n", per_tree, v.c_str(), build);
        std::printf("| accept_sampled over that tree with its rows (%d nodes)%s | %.1f |\n", tree.size(), v.c_str(), accept);
        json.add("sampling_distribution, one row" + v, dist, "us");
        json.add("sampling_distribution with top-k 40 and top-p 0.95, one row" + v, dist_cut, "us");
        json.add("sampling_distribution with top-p 0.95 alone, one row" + v, dist_p, "us");
        json.add("sampled tree builder, <= 16 nodes" + v, build, "us");
        json.add("accept_sampled over a 16-node sampled tree" + v, accept, "us");
    }
    return json.write() ? 0 : 1;
}
