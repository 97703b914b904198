// Random draft-tree shapes shared by the verification tests (CPU and CUDA): every node's parent
// precedes it, -1 marks a child of the context's end.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace test {

enum class TreeShape {
    Chain,        // -1, 0, 1, ...
    Star,         // one root, every other node its child
    Deep,         // two long interleaved chains
    Bushy,        // binary tree under two roots
    Single,       // siblings only (n roots)
    SessionLike,  // one root (as a session's pass with its pending token), random below it
    Random        // any topological parent, several roots
};

inline const char *tree_shape_name(TreeShape s) {
    switch (s) {
        case TreeShape::Chain: return "chain";
        case TreeShape::Star: return "star";
        case TreeShape::Deep: return "deep";
        case TreeShape::Bushy: return "bushy";
        case TreeShape::Single: return "single";
        case TreeShape::SessionLike: return "one root";
        case TreeShape::Random: return "random";
    }
    return "?";
}

struct RandomTree {
    std::vector<int32_t> tokens, parents;
    int32_t size() const { return int32_t(tokens.size()); }
    // Node indices from the root down to v.
    std::vector<int32_t> path_to(int32_t v) const {
        std::vector<int32_t> p;
        for (; v >= 0; v = parents[size_t(v)]) p.push_back(v);
        return {p.rbegin(), p.rend()};
    }
};

inline RandomTree random_tree(TreeShape shape, int32_t n, int32_t vocab, std::mt19937_64 &g) {
    RandomTree t;
    for (int32_t i = 0; i < n; ++i) {
        int32_t p = -1;
        switch (shape) {
            case TreeShape::Chain: p = i - 1; break;
            case TreeShape::Star: p = i == 0 ? -1 : 0; break;
            case TreeShape::Deep: p = i < 2 ? -1 : i - 2; break;
            case TreeShape::Bushy: p = i < 2 ? -1 : (i - 2) / 2; break;
            case TreeShape::Single: p = -1; break;
            case TreeShape::SessionLike: p = i == 0 ? -1 : int32_t(g() % uint64_t(i)); break;
            case TreeShape::Random: p = int32_t(g() % uint64_t(i + 1)) - 1; break;
        }
        t.tokens.push_back(int32_t(g() % uint64_t(vocab)));
        t.parents.push_back(p);
    }
    return t;
}

}  // namespace test
