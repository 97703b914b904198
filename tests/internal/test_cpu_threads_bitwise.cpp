// The CPU backend computes the same bits whatever its thread count, and whether a pass runs on the
// workers or inline (the pool switches between the two by timing, see util/thread_pool.h): each
// output of a job is produced whole by one chunk, so neither who runs a chunk nor how the range
// is split changes a result.
#include <doctest/doctest.h>

#include <cstring>
#include <random>
#include <vector>

#include "engine/backend.h"
#include "model/weights.h"

using namespace specla;

TEST_CASE("cpu backend: logits and states are bitwise equal for 1, 2 and 3 threads") {
    ModelConfig c;
    c.vocab_size = 300, c.hidden_size = 96, c.num_layers = 2, c.num_heads = 2, c.num_v_heads = 4;
    c.head_k_dim = 16, c.head_v_dim = 24, c.conv_size = 4, c.intermediate_size = 256;
    for (const WeightType type : {WeightType::F32, WeightType::BF16}) {
        const ModelWeights w = random_weights(c, 20261202, type);
        std::mt19937_64 g(7);
        std::vector<int32_t> prompt(40), steps(40);
        for (auto &t : prompt) t = int32_t(g() % uint64_t(c.vocab_size));
        for (auto &t : steps) t = int32_t(g() % uint64_t(c.vocab_size));
        std::vector<std::vector<float>> runs;
        for (const int threads : {1, 2, 3}) {
            auto backend = create_cpu_backend(c, w, threads);
            SessionLimits limits;
            limits.max_batch_tokens = 64;
            auto st = backend->create_state(limits);
            const size_t vocab = size_t(c.vocab_size);
            std::vector<float> all(prompt.size() * vocab), out;
            backend->eval_chain(*st, prompt.data(), int32_t(prompt.size()), LogitsRows::All, all.data());
            out = all;
            std::vector<float> row(vocab);
            for (const int32_t t : steps) {  // enough passes for the pool to probe both ways
                backend->eval_chain(*st, &t, 1, LogitsRows::Last, row.data());
                out.insert(out.end(), row.begin(), row.end());
            }
            std::vector<float> state(size_t(c.recurrent_state_floats_per_layer()));
            for (int l = 0; l < c.num_layers; ++l) {
                backend->read_recurrent_state(*st, l, state.data());
                out.insert(out.end(), state.begin(), state.end());
            }
            runs.push_back(std::move(out));
        }
        for (size_t r = 1; r < runs.size(); ++r) {
            CAPTURE(r);
            REQUIRE(runs[r].size() == runs[0].size());
            CHECK(std::memcmp(runs[r].data(), runs[0].data(), runs[0].size() * sizeof(float)) == 0);
        }
    }
}
