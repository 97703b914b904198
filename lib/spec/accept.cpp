// Acceptance rules. Both walk the tree from the end of the context (the "root", whose target
// logits are root_logits) downwards; node_logits row i holds the target's logits after the path
// root -> i, so it judges the children of node i.
//
// Greedy (accept_greedy, and accept_sampled whenever the sampling config is greedy):
//   at the current position let a = argmax of the target's logits (lowest id on ties, as
//   specla::argmax; accept_sampled: greedy_token, i.e. after the logit bias and the penalties
//   of that position's history and over the config's candidate ids, as sample_token). If some
//   child of the current position carries token a, the first such child in node order is
//   accepted and becomes the current position; otherwise the walk stops and a is the bonus token. The emitted tokens (path tokens, then the bonus) are exactly what plain
//   greedy decoding of the target would produce.
//
// Sampled (accept_sampled), multi-round rejection sampling (SpecInfer; for a chain it reduces to
// Leviathan et al. / Chen et al.):
//   at the current position p = sampling_distribution(target logits, sampling, history) (logit
//   bias, penalties over the history of that position: the context, then the tokens of the path
//   from the root to it; temperature, top-k, top-p and min-p applied, ids that are not
//   candidates at probability 0: the distribution plain
//   sampling draws from, so a draft token that is not a candidate is always rejected). The children are tried in node order. Child c, with token x and
//   drafter row q (tree.draft_dists row c; one-hot at x when draft_dists is empty), draws one
//   u = rng.uniform() and is accepted iff q(x) > 0 and u < p(x) / q(x), i.e. with probability
//   min(1, p(x)/q(x)); p(x) = 0 or q(x) = 0 always rejects. On rejection
//       p <- max(0, p - q) / sum(max(0, p - q))
//   and the next child is tried against that residual. When a child is accepted the walk moves to
//   it and starts over with the target's fresh distribution at that node. When every child has
//   been rejected (or there is none) the bonus is sample_from_distribution(p, u) with one more
//   u = rng.uniform(), p being the residual left by the rejections (or the untouched target
//   distribution after an accepted leaf).
//   Random stream: exactly one uniform per child tried, plus one for the bonus.
//   Degenerate residual: when the residual mass is below kResidualFloor (p <= q everywhere up to
//   float rounding, e.g. p == q), the rejection can only have happened through rounding; p is
//   then kept as it was before the subtraction instead of normalising noise (never NaN).
//   Losslessness: if child c's token was drawn from q_c given the earlier siblings (i.i.d.
//   sampling: every sibling shares its parent's row; sampling without replacement: later rows
//   exclude the earlier tokens; top-k drafting: one-hot rows), each round outputs a token
//   distributed as the current p, so the emitted tokens are distributed exactly as sampling
//   from the target token by token.
#include "spec/accept.h"

#include <algorithm>

#include "sampling/sampler.h"
#include "util/error.h"

namespace specla {

namespace {

constexpr double kResidualFloor = kAcceptResidualFloor;

// Children of every position in node order, as singly linked lists: first[n] is the first
// child of the root (the end of the context), first[i] of node i; next[c] the next sibling.
struct Children {
    std::vector<int32_t> first, next;
    explicit Children(const DraftTree &tree) {
        const int32_t n = tree.size();
        first.assign(size_t(n) + 1, -1);
        next.assign(size_t(n), -1);
        std::vector<int32_t> last(size_t(n) + 1, -1);
        for (int32_t c = 0; c < n; ++c) {
            const int32_t slot = tree.parents[size_t(c)] < 0 ? n : tree.parents[size_t(c)];
            if (last[size_t(slot)] < 0) first[size_t(slot)] = c;
            else next[size_t(last[size_t(slot)])] = c;
            last[size_t(slot)] = c;
        }
    }
    int32_t first_of(int32_t pos) const { return first[size_t(pos < 0 ? int32_t(next.size()) : pos)]; }
};

void check_inputs(const DraftTree &tree, const float *root_logits, const float *node_logits, int32_t vocab) {
    require(vocab > 0, SPECLA_ERR_INVALID_ARGUMENT, "accept: vocab must be positive");
    require(root_logits != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "accept: root logits must not be NULL");
    require(tree.parents.size() == tree.tokens.size(), SPECLA_ERR_INVALID_ARGUMENT, "accept: draft tree has ",
            tree.tokens.size(), " tokens but ", tree.parents.size(), " parents");
    require(tree.empty() || node_logits != nullptr, SPECLA_ERR_INVALID_ARGUMENT,
            "accept: node logits must not be NULL for a non-empty tree");
    require(tree.draft_dists.empty() || tree.draft_dists.size() == size_t(tree.size()) * size_t(vocab),
            SPECLA_ERR_INVALID_ARGUMENT, "accept: draft_dists holds ", tree.draft_dists.size(),
            " floats, expected nodes x vocab = ", size_t(tree.size()) * size_t(vocab));
    validate_tree(tree.tokens.data(), tree.parents.data(), tree.size(), vocab);
}

}  // namespace

namespace {
// The greedy walk: choose(pos, path_tokens) is the target's choice at position pos (-1: the
// root) after the draft path whose tokens are path_tokens; called only for positions reached.
template <class Choose>
AcceptResult greedy_walk(const DraftTree &tree, Choose choose) {
    const Children children(tree);
    AcceptResult result;
    std::vector<int32_t> path_tokens;
    int32_t cur = -1;
    for (;;) {
        const int32_t best = choose(cur, path_tokens);
        int32_t c = children.first_of(cur);
        while (c >= 0 && tree.tokens[size_t(c)] != best) c = children.next[size_t(c)];
        if (c < 0) {
            result.bonus = best;
            return result;
        }
        result.path.push_back(c);
        path_tokens.push_back(best);
        cur = c;
    }
}

const float *row_of(const float *root_logits, const float *node_logits, int32_t pos, int32_t vocab) {
    return pos < 0 ? root_logits : node_logits + size_t(pos) * size_t(vocab);
}
}  // namespace

AcceptResult accept_greedy_choices(const DraftTree &tree, int32_t root_choice, const int32_t *node_choice) {
    require(tree.parents.size() == tree.tokens.size(), SPECLA_ERR_INVALID_ARGUMENT, "accept: draft tree has ",
            tree.tokens.size(), " tokens but ", tree.parents.size(), " parents");
    require(tree.empty() || node_choice != nullptr, SPECLA_ERR_INVALID_ARGUMENT,
            "accept: node choices must not be NULL for a non-empty tree");
    return greedy_walk(tree, [&](int32_t pos, const std::vector<int32_t> &) {
        return pos < 0 ? root_choice : node_choice[pos];
    });
}

AcceptResult accept_greedy(const DraftTree &tree, const float *root_logits, const float *node_logits, int32_t vocab) {
    check_inputs(tree, root_logits, node_logits, vocab);
    return greedy_walk(tree, [&](int32_t pos, const std::vector<int32_t> &) {
        return argmax(row_of(root_logits, node_logits, pos, vocab), vocab);
    });
}

AcceptResult accept_sampled(const DraftTree &tree, const float *root_logits, const float *node_logits, int32_t vocab,
                            const SamplingConfig &sampling, Rng &rng, const History &context) {
    check_inputs(tree, root_logits, node_logits, vocab);
    // The history of a position: the context, then the tokens of the path to it.
    auto history = [&](const std::vector<int32_t> &path_tokens) {
        return History{context.context, context.n_context, path_tokens.data(), path_tokens.size()};
    };
    if (sampling.greedy())
        return greedy_walk(tree, [&](int32_t pos, const std::vector<int32_t> &path_tokens) {
            return greedy_token(row_of(root_logits, node_logits, pos, vocab), vocab, sampling, history(path_tokens));
        });
    const Children children(tree);
    std::vector<int32_t> path_tokens;
    const bool one_hot = tree.draft_dists.empty();
    std::vector<float> p(size_t(vocab), 0.f);
    std::vector<double> residual(size_t(vocab), 0.0);
    AcceptResult result;
    int32_t cur = -1;
    const float *logits = root_logits;
    for (;;) {
        sampling_distribution(logits, vocab, sampling, history(path_tokens), p.data());
        int32_t accepted = -1;
        for (int32_t c = children.first_of(cur); c >= 0; c = children.next[size_t(c)]) {
            const int32_t x = tree.tokens[size_t(c)];
            const float *q = one_hot ? nullptr : tree.draft_dists.data() + size_t(c) * size_t(vocab);
            const double qx = one_hot ? 1.0 : double(q[x]);
            const double px = double(p[size_t(x)]);
            const double u = rng.uniform();
            if (qx > 0.0 && px > 0.0 && u < px / qx) {
                accepted = c;
                break;
            }
            // Rejected: p <- norm(max(0, p - q)).
            double mass = 0;
            if (one_hot) {
                // max(0, p - e_x) only removes x (p(x) <= 1).
                for (int32_t t = 0; t < vocab; ++t) mass += residual[size_t(t)] = t == x ? 0.0 : double(p[size_t(t)]);
            } else {
                for (int32_t t = 0; t < vocab; ++t)
                    mass += residual[size_t(t)] = std::max(0.0, double(p[size_t(t)]) - double(q[t]));
            }
            if (mass >= kResidualFloor) {
                const double inv = 1.0 / mass;
                for (int32_t t = 0; t < vocab; ++t) p[size_t(t)] = float(residual[size_t(t)] * inv);
            }
            // else: keep p (see the degenerate-residual note above).
        }
        if (accepted < 0) {
            result.bonus = sample_from_distribution(p.data(), vocab, rng.uniform());
            return result;
        }
        result.path.push_back(accepted);
        path_tokens.push_back(tree.tokens[size_t(accepted)]);
        cur = accepted;
        logits = node_logits + size_t(accepted) * size_t(vocab);
    }
}

AcceptResult accept_sampled_rows(const DraftTree &tree, RowSampler &rows, int32_t vocab, int32_t root_row,
                                 int32_t first_node_row, Rng &rng) {
    require(vocab > 0, SPECLA_ERR_INVALID_ARGUMENT, "accept: vocab must be positive");
    require(tree.parents.size() == tree.tokens.size(), SPECLA_ERR_INVALID_ARGUMENT, "accept: draft tree has ",
            tree.tokens.size(), " tokens but ", tree.parents.size(), " parents");
    require(tree.draft_dists.empty(), SPECLA_ERR_INVALID_ARGUMENT,
            "accept: a backend's row sampler judges one-hot proposals only (the draft has distributions)");
    validate_tree(tree.tokens.data(), tree.parents.data(), tree.size(), vocab);
    const Children children(tree);
    std::vector<int32_t> ids, nodes, removed;
    std::vector<double> probs;
    AcceptResult result;
    int32_t cur = -1;
    for (;;) {
        rows.select(cur < 0 ? root_row : first_node_row + cur);
        ids.clear(), nodes.clear(), removed.clear();
        for (int32_t c = children.first_of(cur); c >= 0; c = children.next[size_t(c)])
            ids.push_back(tree.tokens[size_t(c)]), nodes.push_back(c);
        double total = 1.0, removed_mass = 0.0;
        probs.resize(ids.size());
        if (!ids.empty()) rows.probabilities(ids.data(), int32_t(ids.size()), total, probs.data());
        int32_t accepted = -1;
        for (size_t i = 0; i < ids.size() && accepted < 0; ++i) {
            const int32_t x = ids[i];
            const bool gone = std::find(removed.begin(), removed.end(), x) != removed.end();
            const double mass = total - removed_mass;
            const double px = gone || !(mass > 0.0) ? 0.0 : probs[i] / mass;  // the current p(x)
            const double u = rng.uniform();
            if (px > 0.0 && u < px) {
                accepted = nodes[i];
                break;
            }
            // Rejected: x leaves the residual, unless what is left is rounding noise.
            if (px > 0.0 && (mass - probs[i]) / mass >= kResidualFloor) removed.push_back(x), removed_mass += probs[i];
        }
        if (accepted < 0) {
            result.bonus = rows.draw(removed.data(), int32_t(removed.size()), rng.uniform());
            return result;
        }
        result.path.push_back(accepted);
        cur = accepted;
    }
}

}  // namespace specla
