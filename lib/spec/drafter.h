// The drafter interface: anything that proposes a tree of candidate tokens after a context.
// Implementations: prompt lookup (n-gram match in the context) and the learned EAGLE-style
// drafter (spec/eagle_drafter.md), which reads the target's features and its own distributions.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/backend.h"
#include "sampling/rng.h"
#include "engine/draft_tree.h"

namespace specla {

// How a drafter with distributions grows its tree level by level (specla_tree_shape):
// Dynamic: best-first levels cut by the margin, the node budget and the measured costs;
// FixedWidth (greedy only): every level expands the newest depth's top_k nodes down to the depth
// budget (TreeParams::fixed_width), the shape a backend can draft in one device call; Auto: the
// library's choice, Dynamic until fixed width is measured to pay on a backend.
enum class TreeShape { Auto, Dynamic, FixedWidth };

struct DraftBudget {
    int32_t max_nodes = 16;  // at most this many draft nodes
    int32_t max_depth = 8;   // at most this deep
    // How a drafter with distributions shapes its tree within the budget (spec/tree_builder.h,
    // TreeParams); prompt lookup ignores them.
    int32_t top_k = 4;            // children per expanded node, nodes expanded per level
    float prune_margin = 8.f;     // nats behind the best path's score; <= 0: no margin
    bool size_from_cost = true;   // size the tree from the measured pass costs
    TreeShape shape = TreeShape::Auto;
};

class Drafter {
public:
    virtual ~Drafter() = default;
    // Propose a tree after `context` (the full token history, including the last, not yet
    // verified token). May return an empty tree (no idea): the step then decodes one token.
    virtual void propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) = 0;
    // Tell the drafter what was accepted (for drafters with state); default: nothing.
    virtual void observe_accepted(const std::vector<int32_t> &context) {}

    // Drafters that read the target's features (spec/eagle_drafter.md) say so here; generation
    // then hands them the feature of every token the target consumes (observe_features), from
    // verification passes and plain decoding steps alike, so that none is missed.
    virtual bool wants_features() const { return false; }
    // The target's features (hidden_size floats per row) after the tokens at context positions
    // first_position, first_position + 1, ... (0-based), in the order the target consumed them.
    // A position that does not continue the previous call's rows marks a new sequence.
    virtual void observe_features(int64_t first_position, const float *features, int32_t n_rows) {}
    // The sampler the generation uses and its random stream (null when greedy), valid until
    // end_generation(): sampled generation draws the draft from the drafter's distribution under
    // it and hands those distributions to the acceptance rule (DraftTree::draft_dists).
    virtual void begin_generation(const SamplingConfig &sampling, Rng *rng) {}
    virtual void end_generation() {}
    // Measured seconds of one target verification pass over n_nodes draft nodes.
    virtual void observe_verify_pass(int32_t n_nodes, double seconds) {}
};

}  // namespace specla
