#include "engine/draft_tree.h"

#include "util/error.h"

namespace specla {

void validate_tree(const int32_t *tokens, const int32_t *parents, int32_t n, int32_t vocab) {
    require(n >= 0, SPECLA_ERR_INVALID_ARGUMENT, "draft tree: negative node count ", n);
    if (n == 0) return;
    require(tokens != nullptr && parents != nullptr, SPECLA_ERR_INVALID_ARGUMENT,
            "draft tree: tokens and parents must not be NULL");
    for (int32_t i = 0; i < n; ++i) {
        // Topological order: a parent comes before its children; -1 is the end of the context.
        require(parents[i] >= -1 && parents[i] < i, SPECLA_ERR_INVALID_ARGUMENT, "draft tree: node ", i,
                " has parent ", parents[i], " (must be -1 or an earlier node, in [-1, ", i, "))");
        require(tokens[i] >= 0 && tokens[i] < vocab, SPECLA_ERR_TOKEN_OUT_OF_RANGE, "draft tree: node ", i,
                " has token ", tokens[i], " outside [0, ", vocab, ")");
    }
}

std::vector<int32_t> node_depths(const int32_t *parents, int32_t n) {
    std::vector<int32_t> depth(static_cast<size_t>(n > 0 ? n : 0));
    // Parents precede their children, so one forward pass suffices.
    for (int32_t i = 0; i < n; ++i) {
        const int32_t p = parents[i];
        require(p >= -1 && p < i, SPECLA_ERR_INVALID_ARGUMENT, "draft tree: node ", i, " has parent ", p,
                " (must be -1 or an earlier node)");
        depth[size_t(i)] = p < 0 ? 1 : depth[size_t(p)] + 1;
    }
    return depth;
}

}  // namespace specla
