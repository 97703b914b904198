// What a session reports as its memory (Session::memory, specla_session_get_memory) is exactly what
// it allocated: the host allocator's live bytes grow by the reported host bytes (all but the
// token history, which the standard allocator holds) when a session is created, after its buffers
// grow in a verification, and fall back when it is freed.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "engine/model.h"
#include "memory/host_alloc.h"
#include "model/weights.h"
#include "session/session.h"
#include "engine/draft_tree.h"

using namespace specla;

namespace {

size_t live() { return host_alloc_stats().live_bytes; }

size_t reported_host_alloc_bytes(const Session &s) {
    const Session::Memory m = s.memory();
    CHECK(m.backend.host_bytes == m.backend.state_bytes + m.backend.factor_bytes + m.backend.scratch_bytes);
    CHECK(m.backend.device_bytes == 0);
    return m.backend.host_bytes + m.own_bytes;
}

}  // namespace

TEST_CASE("session memory: the reported host bytes are the host allocator's live bytes of the session") {
    ModelConfig c;
    c.vocab_size = 300, c.hidden_size = 96, c.num_layers = 2, c.num_heads = 2, c.num_v_heads = 4;
    c.head_k_dim = 16, c.head_v_dim = 24, c.conv_size = 4, c.intermediate_size = 256;
    ModelOptions o;
    o.n_threads = 2;
    auto model = Model::from_weights(c, random_weights(c, 11, WeightType::F32), o);
    SessionLimits limits;
    limits.max_batch_tokens = 48;
    limits.max_tree_nodes = 12;

    const size_t base = live();
    auto s = std::make_unique<Session>(model, limits);
    CHECK(live() - base == reported_host_alloc_bytes(*s));
    const Session::Memory m0 = s->memory();
    CHECK(m0.backend.state_bytes == size_t(c.num_layers) *
                                        size_t(c.recurrent_state_floats_per_layer() + c.conv_cache_floats_per_layer()) *
                                        sizeof(float));
    CHECK(m0.backend.scratch_bytes > m0.backend.state_bytes);  // what state_bytes alone used to hide

    std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5};
    s->eval(prompt.data(), prompt.size(), LogitsRows::None, nullptr);
    s->set_pending(7);
    // A tree verified with logits and a deferred commit: verification outputs, tree scratch and
    // the pending path grow on first use.
    DraftTree tree;
    tree.tokens = {8, 9, 10, 11, 12};
    tree.parents = {-1, 0, 0, 1, 3};
    std::vector<float> node_logits(tree.tokens.size() * size_t(c.vocab_size));
    Session::VerifyBuffers out;
    out.node_logits = node_logits.data();
    s->verify(tree, TreeAlgorithm::Hybrid, out);
    s->commit({0, 1, 3}, 20, /*deferred=*/true);
    const Session::Memory m1 = s->memory();
    CHECK(m1.backend.scratch_bytes + m1.own_bytes > m0.backend.scratch_bytes + m0.own_bytes);
    CHECK(live() - base == reported_host_alloc_bytes(*s));
    CHECK(m1.context_bytes >= size_t(s->n_past()) * sizeof(int32_t));

    s.reset();
    CHECK(live() == base);
}
