// A draft tree: candidate tokens after the session's context, each with a parent. Nodes are in
// topological order (parents[i] < i); parents[i] == -1 marks a child of the context's end (the
// first draft position). A chain is the tree whose parents are -1, 0, 1, 2, ...
#pragma once

#include <cstdint>
#include <vector>

namespace specla {

struct DraftTree {
    std::vector<int32_t> tokens;
    std::vector<int32_t> parents;
    // Optional drafter distributions, one row of vocab floats per node: the distribution the
    // node's token was drawn from, given its earlier siblings (siblings drawn independently share
    // their parent's row; siblings drawn without replacement have the earlier siblings' tokens
    // removed and the row renormalised). Empty: children were chosen deterministically (greedy /
    // top-k drafting), treated as one-hot proposals.
    std::vector<float> draft_dists;

    int32_t size() const { return int32_t(tokens.size()); }
    bool empty() const { return tokens.empty(); }
    void clear() { tokens.clear(), parents.clear(), draft_dists.clear(); }
    int32_t add(int32_t token, int32_t parent) {
        tokens.push_back(token);
        parents.push_back(parent);
        return int32_t(tokens.size()) - 1;
    }
};

// Throws SPECLA_ERR_INVALID_ARGUMENT unless parents are topological and in range, and
// SPECLA_ERR_TOKEN_OUT_OF_RANGE for a bad token.
void validate_tree(const int32_t *tokens, const int32_t *parents, int32_t n, int32_t vocab);

// Depth of every node (children of the context end have depth 1).
std::vector<int32_t> node_depths(const int32_t *parents, int32_t n);

}  // namespace specla
