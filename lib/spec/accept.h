// Acceptance rules over a verified tree: which path of the draft the target keeps, and the
// target's own next token after it (the bonus). Greedy acceptance reproduces plain greedy
// decoding token for token; sampled acceptance keeps the output distributed exactly as sampling
// from the target (chains: Leviathan/Chen; trees: multi-round rejection over siblings).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "sampling/rng.h"
#include "sampling/sampler.h"
#include "engine/draft_tree.h"

namespace specla {

struct AcceptResult {
    std::vector<int32_t> path;  // accepted node indices, root to leaf (each the child of the previous)
    int32_t bonus = -1;         // the target's token after the accepted path
};

// root_logits: the target's logits at the end of the context (judges the nodes with parent -1).
// node_logits: row i = the target's logits after node i's path. Both vocab wide.
AcceptResult accept_greedy(const DraftTree &tree, const float *root_logits, const float *node_logits, int32_t vocab);

// The same rule from the target's argmax at the root and after every node (what a GPU backend
// returns without copying logits to the host).
AcceptResult accept_greedy_choices(const DraftTree &tree, int32_t root_choice, const int32_t *node_choice);

// Sampling with the whole of lib/sampling/sampler.h applied to the target (and used as given for the
// drafter's rows), over the config's candidate ids (SamplingConfig::n_candidates), exactly the
// distribution plain sampling draws from. Uses tree.draft_dists when present, one-hot proposals
// otherwise. A greedy config (SamplingConfig::greedy()) gives accept_greedy's result (its argmax
// taken over the candidates) and draws nothing from rng;
// otherwise one uniform is drawn per child tested and one for the bonus. The exact rule, its
// degenerate cases and the condition for losslessness are documented in accept.cpp.
// `context`: the tokens before the root (History::path unused); a node's history is the context
// followed by the tokens of its path, which is what the logit bias and penalties read.
AcceptResult accept_sampled(const DraftTree &tree, const float *root_logits, const float *node_logits, int32_t vocab,
                            const SamplingConfig &sampling, Rng &rng, const History &context = History{});

// accept_sampled's rule for one-hot proposals (tree.draft_dists empty) over rows that stay where a
// backend keeps them (Backend::row_sampler): the root's row is root_row, node i's first_node_row +
// i. The rows' distributions are the sampler's, i.e. sampling_distribution's for a config without
// history-dependent transforms. The residual after rejected tokens is p0 / (total - their mass)
// outside them, which the host rule computes by renormalising after each rejection (the same up
// to its float rounding of each step), with the same floor; the random stream is the same: one
// uniform per child tried, one for the bonus.
// The tree is validated against `vocab` first (token ids index the rows).
AcceptResult accept_sampled_rows(const DraftTree &tree, RowSampler &rows, int32_t vocab, int32_t root_row,
                                 int32_t first_node_row, Rng &rng);

}  // namespace specla
