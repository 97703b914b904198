// The drafter interface: anything that proposes a tree of candidate tokens after a context.
// Implementations: prompt lookup (n-gram match in the context); the EAGLE-style head comes later.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "spec/draft_tree.h"

namespace specla {

struct DraftBudget {
    int32_t max_nodes = 16;  // at most this many draft nodes
    int32_t max_depth = 8;   // at most this deep
};

class Drafter {
public:
    virtual ~Drafter() = default;
    // Propose a tree after `context` (the full token history, including the last, not yet
    // verified token). May return an empty tree (no idea): the step then decodes one token.
    virtual void propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) = 0;
    // Tell the drafter what was accepted (for drafters with state); default: nothing.
    virtual void observe_accepted(const std::vector<int32_t> &context) {}
};

}  // namespace specla
