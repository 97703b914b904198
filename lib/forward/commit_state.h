// The speculative bookkeeping of one sequence, the same for every backend (each keeps the factor
// data itself): a verification's per-node factors stay valid until the state moves; one
// root-to-leaf path of them may then be committed, at once or deferred; a deferred commit stays
// pending until the next pass that loads the state applies it (or a flush).
//
//   state moves (chain pass, reset, import)  ->  nothing to commit
//   tree verified (n nodes)                   ->  a path of those nodes may be committed
//   commit(path)                              ->  pending (deferred) or applied at once
//   any pass / flush                          ->  pending applied
#pragma once

#include <algorithm>
#include <cstdint>

#include "engine/backend.h"
#include "util/error.h"

namespace specla {

class CommitState {
public:
    // Factor rows a sequence needs: its largest draft tree, plus the pending token, which a
    // speculative step feeds in front of the draft as one more row (spec/speculative.h).
    static int32_t factor_rows(const SessionLimits &limits) { return std::max(limits.max_tree_nodes, 1) + 1; }

    void verified(int32_t nodes) {
        verified_ = true;
        verified_nodes_ = nodes;
    }
    // The state moved on (or was replaced): earlier verification results no longer apply.
    void state_moved() { verified_ = false; }
    void reset() {
        verified_ = false;
        pending_ = 0;
    }

    // Checks that `nodes` is a path the last verification can commit, then records it as the
    // pending commit (the caller applies it now or leaves it deferred).
    void begin_commit(const int32_t *nodes, int32_t n) {
        require(verified_, SPECLA_ERR_STATE, "no verified tree to commit from");
        for (int32_t i = 0; i < n; ++i)
            require(nodes[i] >= 0 && nodes[i] < verified_nodes_, SPECLA_ERR_INTERNAL, "commit_path: node ", nodes[i],
                    " is not in the verified tree");
        require(pending_ == 0, SPECLA_ERR_INTERNAL, "commit_path: an earlier commit is still pending");
        verified_ = false;
        pending_ = std::max(n, int32_t(0));
    }
    // Nodes of the pending commit (0: none).
    int32_t pending() const { return pending_; }
    void pending_applied() { pending_ = 0; }

private:
    bool verified_ = false;
    int32_t verified_nodes_ = 0;
    int32_t pending_ = 0;
};

}  // namespace specla
