// Prompt lookup (n-gram) drafting: find earlier occurrences of the context's last n tokens
// (n from max_n down to min_n; the longest n with any occurrence wins) and propose what followed
// them. Several occurrences with different continuations give a tree.
//
// Proposal rule, for the longest n with at least one earlier occurrence:
//   * occurrences are taken most recent first (at most max_matches of them);
//   * each one's continuation is the tokens that followed it, up to
//     min(max_draft_len, budget.max_depth) tokens; a continuation that runs into the end of the
//     context continues periodically (the text between the occurrence and the end repeats), so a
//     loop in the context is drafted past its end;
//   * the continuations are merged into a prefix tree in that order: a continuation follows the
//     nodes of earlier ones while its tokens agree and branches at the first differing token, if
//     the node there has fewer than max_branches children (otherwise the rest of it is dropped);
//   * nodes are created in that order (topological; the first child of every node comes from the
//     most recent occurrence), at most budget.max_nodes of them.
// No occurrence (or a context shorter than min_n + 1): an empty tree. Proposals carry no drafter
// distributions (one-hot: the continuations are chosen deterministically).
//
// Cost: the drafter keeps, for every n in [min_n, max_n], a hash index from n-gram to its most
// recent end position plus a per-position link to the previous occurrence, so a proposal costs
// O(max_n + max_matches * depth) and a call indexes only the tokens appended since the last call.
// The context is expected to grow by appending (it is the whole history each time). A context
// shorter than the indexed one, or one whose indexed prefix no longer matches (checked on a
// bounded window at its start and end, so the check does not scan the history), is re-indexed
// from scratch; reset() forces that. A wrong guess can only cost acceptance, never correctness:
// every proposal is verified by the target.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "spec/drafter.h"

namespace specla {

struct PromptLookupParams {
    int32_t min_n = 2;          // shortest n-gram matched (>= 1)
    int32_t max_n = 4;          // longest n-gram matched (>= min_n)
    int32_t max_draft_len = 8;  // longest proposed continuation (also capped by DraftBudget::max_depth)
    int32_t max_branches = 2;   // at most this many children per node (1: always a chain)
    int32_t max_matches = 64;   // occurrences examined per proposal, most recent first
};

class PromptLookupDrafter : public Drafter {
public:
    // Throws SPECLA_ERR_INVALID_ARGUMENT for inconsistent parameters.
    explicit PromptLookupDrafter(const PromptLookupParams &params = PromptLookupParams());

    void propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) override;
    void observe_accepted(const std::vector<int32_t> &context) override { sync(context); }

    // Forget the indexed context; the next call re-indexes from scratch.
    void reset();

    const PromptLookupParams &params() const { return params_; }
    size_t indexed_length() const { return ctx_.size(); }

private:
    struct Index {
        std::unordered_map<uint64_t, int32_t> head;  // n-gram hash -> most recent end position
        std::vector<int32_t> prev;                   // end position -> previous end with the same hash
    };

    void sync(const std::vector<int32_t> &context);
    uint64_t hash_at(int32_t n, size_t end) const;  // hash of ctx_[end - n, end)

    PromptLookupParams params_;
    std::vector<int32_t> ctx_;  // the indexed history
    std::vector<Index> index_;  // one per n, index_[n - min_n]
    // An end position e is indexed for n when n <= e < ctx_.size(): the n-gram ctx_[e - n, e)
    // has a continuation ctx_[e].

    // Scratch of propose().
    std::vector<int32_t> cont_, first_child_, next_sibling_, child_count_;
};

}  // namespace specla
