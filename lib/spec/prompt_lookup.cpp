#include "spec/prompt_lookup.h"

#include <algorithm>
#include <limits>

#include "util/error.h"

namespace specla {

namespace {
// Tokens compared at each end of the indexed prefix to decide that a context extends it.
constexpr size_t kCheckWindow = 64;
}  // namespace

PromptLookupDrafter::PromptLookupDrafter(const PromptLookupParams &params) : params_(params) {
    require(params.min_n >= 1, SPECLA_ERR_INVALID_ARGUMENT, "prompt lookup: min_n must be >= 1 (got ", params.min_n,
            ")");
    require(params.max_n >= params.min_n, SPECLA_ERR_INVALID_ARGUMENT, "prompt lookup: max_n (", params.max_n,
            ") must be >= min_n (", params.min_n, ")");
    require(params.max_n <= 64, SPECLA_ERR_INVALID_ARGUMENT, "prompt lookup: max_n must be <= 64 (got ",
            params.max_n, ")");
    require(params.max_draft_len >= 1, SPECLA_ERR_INVALID_ARGUMENT, "prompt lookup: max_draft_len must be >= 1 (got ",
            params.max_draft_len, ")");
    require(params.max_branches >= 1, SPECLA_ERR_INVALID_ARGUMENT, "prompt lookup: max_branches must be >= 1 (got ",
            params.max_branches, ")");
    require(params.max_matches >= 1, SPECLA_ERR_INVALID_ARGUMENT, "prompt lookup: max_matches must be >= 1 (got ",
            params.max_matches, ")");
    index_.resize(size_t(params.max_n - params.min_n + 1));
}

void PromptLookupDrafter::reset() {
    ctx_.clear();
    for (Index &ix : index_) {
        ix.head.clear();
        ix.prev.clear();
    }
}

uint64_t PromptLookupDrafter::hash_at(int32_t n, size_t end) const {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ uint64_t(n);
    for (size_t i = end - size_t(n); i < end; ++i) {
        h ^= uint64_t(uint32_t(ctx_[i]));
        h *= 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h;
}

void PromptLookupDrafter::sync(const std::vector<int32_t> &context) {
    require(context.size() < size_t(std::numeric_limits<int32_t>::max()), SPECLA_ERR_INVALID_ARGUMENT,
            "prompt lookup: context too long");
    const size_t old = ctx_.size();
    bool extends = context.size() >= old;
    if (extends && old > 0) {
        const size_t w = std::min(old, kCheckWindow);
        extends = std::equal(ctx_.begin(), ctx_.begin() + w, context.begin()) &&
                  std::equal(ctx_.end() - w, ctx_.end(), context.begin() + (old - w));
    }
    if (!extends) reset();
    const size_t from = ctx_.size(), len = context.size();
    if (from == len) return;
    ctx_.insert(ctx_.end(), context.begin() + from, context.end());
    for (int32_t n = params_.min_n; n <= params_.max_n; ++n) {
        Index &ix = index_[size_t(n - params_.min_n)];
        ix.prev.resize(len, -1);
        // New ends: every e < len with n <= e not indexed before (those were e < from).
        for (size_t e = std::max(size_t(n), from); e < len; ++e) {
            const auto [it, inserted] = ix.head.try_emplace(hash_at(n, e), int32_t(e));
            if (!inserted) {
                ix.prev[e] = it->second;
                it->second = int32_t(e);
            }
        }
    }
}

void PromptLookupDrafter::propose(const std::vector<int32_t> &context, const DraftBudget &budget, DraftTree &out) {
    out.clear();
    sync(context);
    const int32_t depth = std::min(params_.max_draft_len, budget.max_depth);
    if (depth <= 0 || budget.max_nodes <= 0) return;
    const size_t len = ctx_.size();
    for (int32_t n = params_.max_n; n >= params_.min_n; --n) {
        if (len < size_t(n) + 1) continue;  // an earlier occurrence needs a continuation before the end
        const Index &ix = index_[size_t(n - params_.min_n)];
        const auto found = ix.head.find(hash_at(n, len));
        if (found == ix.head.end()) continue;

        // Prefix tree of the continuations: slot 0 is the end of the context, slot i + 1 node i.
        first_child_.assign(1, -1);
        child_count_.assign(1, 0);
        next_sibling_.clear();
        cont_.resize(size_t(depth));
        int32_t matches = 0;
        bool full = false;
        for (int32_t e = found->second; e >= 0 && matches < params_.max_matches && !full; e = ix.prev[size_t(e)]) {
            // Hash collisions only: the index links equal hashes, check the tokens.
            if (!std::equal(ctx_.begin() + (e - n), ctx_.begin() + e, ctx_.end() - n)) continue;
            ++matches;
            // What followed the occurrence, continued periodically past the end of the context.
            for (int32_t j = 0; j < depth; ++j) {
                const size_t pos = size_t(e) + size_t(j);
                cont_[size_t(j)] = pos < len ? ctx_[pos] : cont_[pos - len];
            }
            int32_t at = -1;  // current node, -1 = end of the context
            for (int32_t j = 0; j < depth; ++j) {
                const int32_t token = cont_[size_t(j)];
                const size_t slot = size_t(at + 1);
                int32_t child = first_child_[slot], last = -1;
                while (child >= 0 && out.tokens[size_t(child)] != token) last = child, child = next_sibling_[size_t(child)];
                if (child >= 0) {  // shared prefix with an earlier continuation
                    at = child;
                    continue;
                }
                if (child_count_[slot] >= params_.max_branches) break;  // no room to branch here
                if (out.size() >= budget.max_nodes) {
                    full = true;
                    break;
                }
                child = out.add(token, at);
                first_child_.push_back(-1);
                child_count_.push_back(0);
                next_sibling_.push_back(-1);
                if (last < 0) first_child_[slot] = child;
                else next_sibling_[size_t(last)] = child;
                ++child_count_[slot];
                at = child;
            }
        }
        if (matches > 0) return;  // the longest n with an occurrence decides
    }
}

}  // namespace specla
