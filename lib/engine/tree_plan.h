// The heavy-light plan of a draft tree: draft-tree topology, used by every backend's hybrid tree
// schedule (lib/engine/tree_recurrence.md states the method). Each chain follows heavy children, so
// its state can stay resident while it advances; only the states at branch points (parents of light
// children) are materialised. Plain C++, no backend code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specla {

// Heavy-light decomposition of a tree given by parents (topological, -1 = root's children).
struct TreePlan {
    struct Chain {
        int32_t start_parent;        // -1: starts from the committed state
        std::vector<int32_t> nodes;  // consecutive path, each the heavy child of the previous
    };
    std::vector<Chain> chains;           // ordered so every chain's start parent is computed before it
    std::vector<int32_t> snapshot_slot;  // per node: slot of its materialised state, or -1
    int32_t n_snapshots = 0;
    std::vector<int32_t> waves;  // per chain: number of light edges above it (chains of one wave are independent)

    static TreePlan build(const int32_t *parents, int32_t n);
};

}  // namespace specla
