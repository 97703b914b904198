// The check that fixed-width trees drafted in one backend call (Backend::draft_fixed_width, the
// catch-up folded in) equal those an EagleDrafter drafts level by level through verify_tree on the
// same backend: widths 1..32, depths 2..6, four proposals per sequence (the first shape run
// eagerly, the next captured, the rest replayed where the backend keeps graphs), each proposal's
// catch-up inside the call. The drafter checks every level's frontier against TreeBuilder's rule
// while it replays the call, so a frontier rule that drifted fails here as an internal error.
// One definition, so that the CPU and CUDA tests cover the same cases.
#pragma once

#include <doctest/doctest.h>

#include <memory>
#include <random>
#include <vector>

#include "engine/model.h"
#include "session/session.h"
#include "spec/eagle_drafter.h"
#include "support/fixture.h"

namespace test {

// `target`: gdn_tiny_a on the backend under test; returns the number of trees compared.
inline int check_fixed_width_one_call_equals_level_by_level(const std::shared_ptr<specla::Model> &target) {
    using namespace specla;
    const size_t D = size_t(target->config().hidden_size);
    const int32_t V = target->config().vocab_size;
    std::mt19937_64 rng(41);
    int trees = 0;
    for (int32_t width : {1, 2, 3, 4, 8, 32}) {
        for (int32_t depth : {2, 3, 6}) {
            auto one_call = EagleDrafter::load(fixture_dir("eagle_tiny_a"), *target);
            auto by_level = EagleDrafter::load(fixture_dir("eagle_tiny_a"), *target);
            REQUIRE(one_call->model().supports_fixed_width_draft(width));
            by_level->allow_one_call_drafting(false);
            DraftBudget b;
            b.max_nodes = 64;
            b.max_depth = depth;
            b.top_k = width;
            b.size_from_cost = false;
            b.shape = TreeShape::FixedWidth;
            std::vector<int32_t> ctx(size_t(4 + rng() % 9));
            for (int32_t &t : ctx) t = int32_t(rng() % uint64_t(V));
            Session s(target, SessionLimits());
            std::vector<float> f((ctx.size() - 1) * D);
            s.eval(ctx.data(), ctx.size() - 1, LogitsRows::None, nullptr, f.data());
            int64_t known = 0;
            for (int round = 0; round < 4; ++round) {
                const int32_t n_new = int32_t(ctx.size() - 1 - size_t(known));
                for (EagleDrafter *d : {one_call.get(), by_level.get()}) d->observe_features(known, f.data(), n_new);
                known = int64_t(ctx.size()) - 1;
                DraftTree a, c;
                one_call->propose(ctx, b, a);
                by_level->propose(ctx, b, c);
                INFO("width ", width, ", depth ", depth, ", round ", round);
                CHECK(a.tokens == c.tokens);
                CHECK(a.parents == c.parents);
                CHECK(!a.empty());
                ++trees;
                // The sequence goes on by a few tokens (the tree's first path, then a random one).
                std::vector<int32_t> more;
                for (int32_t i = 0; i < a.size() && a.parents[size_t(i)] == i - 1 && more.size() < 3; ++i)
                    more.push_back(a.tokens[size_t(i)]);
                more.push_back(int32_t(rng() % uint64_t(V)));
                const size_t from = ctx.size() - 1;
                ctx.insert(ctx.end(), more.begin(), more.end());
                f.assign(more.size() * D, 0.f);
                s.eval(ctx.data() + from, more.size(), LogitsRows::None, nullptr, f.data());
            }
            // Every round's catch-up ran inside the one-call tree (the reference: never).
            CHECK(one_call->catch_ups_in_one_call() == 4);
            CHECK(by_level->catch_ups_in_one_call() == 0);
        }
    }
    return trees;
}

}  // namespace test
