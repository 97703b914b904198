// The grid of EAGLE tree settings that the greedy-equals-plain tests run on every backend: the
// three tree shapes (AUTO is one of the other two per backend), a fixed node budget or one sized
// from the pass costs, deferred or immediate commit.
// One definition so that the CPU and CUDA tests cover the same cases.
#pragma once

#include <doctest/doctest.h>

#include "specla/specla.h"
#include "support/params.h"

namespace test {

// Calls fn(params, fixed_size) for each case of the grid, with params built from gp; the case
// is named in doctest's INFO for any failure inside fn.
template <class Fn>
void for_each_eagle_tree_case(const GenerateParams &gp, Fn &&fn) {
    for (specla_tree_shape shape :
         {SPECLA_TREE_SHAPE_AUTO, SPECLA_TREE_SHAPE_DYNAMIC, SPECLA_TREE_SHAPE_FIXED_WIDTH})
        for (bool fixed_size : {true, false})
            for (bool deferred : {true, false}) {
                SpecParams p;
                p.generate = gp;
                p.max_draft_nodes = 12;
                p.max_draft_depth = 5;
                p.tree_top_k = 3;
                p.tree_size_from_cost = !fixed_size;
                p.deferred_commit = deferred;
                p.tree_shape = shape;
                INFO("tree shape ", int(shape), ", fixed size ", fixed_size, ", deferred ", deferred);
                fn(p, fixed_size);
            }
}

}  // namespace test
