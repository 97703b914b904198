#include "engine/tree_plan.h"

namespace specla {

TreePlan TreePlan::build(const int32_t *parents, int32_t n) {
    TreePlan plan;
    std::vector<int32_t> subtree(size_t(n), 1), heavy(size_t(n), -1);
    for (int32_t i = n - 1; i >= 0; --i)
        if (parents[i] >= 0) subtree[size_t(parents[i])] += subtree[size_t(i)];
    // Heavy child: the child with the largest subtree (first in node order on ties).
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = parents[i];
        if (p >= 0 && (heavy[size_t(p)] < 0 || subtree[size_t(i)] > subtree[size_t(heavy[size_t(p)])]))
            heavy[size_t(p)] = i;
    }
    plan.snapshot_slot.assign(size_t(n), -1);
    std::vector<int32_t> chain_wave_of_node(size_t(n), 0);
    // Chain heads are the nodes that are not their parent's heavy child; by node order every
    // head's parent lies in a chain whose head has a smaller index, so it is planned first.
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = parents[i];
        // Children of the committed state all start from it: each heads a chain.
        const bool is_head = p < 0 || heavy[size_t(p)] != i;
        if (!is_head) continue;
        Chain c;
        c.start_parent = p;
        for (int32_t v = i; v >= 0; v = heavy[size_t(v)]) c.nodes.push_back(v);
        // A light child needs its parent's state materialised.
        if (p >= 0 && plan.snapshot_slot[size_t(p)] < 0) plan.snapshot_slot[size_t(p)] = plan.n_snapshots++;
        const int32_t wave = p < 0 ? 0 : chain_wave_of_node[size_t(p)] + 1;
        for (int32_t v : c.nodes) chain_wave_of_node[size_t(v)] = wave;
        plan.waves.push_back(wave);
        plan.chains.push_back(std::move(c));
    }
    return plan;
}

}  // namespace specla
