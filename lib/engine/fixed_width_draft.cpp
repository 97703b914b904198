#include "engine/fixed_width_draft.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "util/error.h"

namespace specla {

void fixed_width_frontier(const int32_t *ids, const float *logp, int32_t rows, int32_t width,
                          const float *parent_scores, FixedWidthFrontier &out) {
    struct Candidate {
        float score;
        int32_t token, row;
    };
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    std::vector<Candidate> cands;
    cands.reserve(size_t(rows) * size_t(width));
    for (int32_t r = 0; r < rows; ++r)
        for (int32_t i = 0; i < width; ++i) {
            const int32_t id = ids[size_t(r) * size_t(width) + size_t(i)];
            const float lp = logp[size_t(r) * size_t(width) + size_t(i)];
            if (id < 0 || lp == kNegInf) break;
            const float parent = parent_scores ? parent_scores[r] : 0.f;
            cands.push_back({parent + std::min(0.f, lp), id, r});
        }
    // Stable: equal scores keep candidate order (the lower index first).
    std::stable_sort(cands.begin(), cands.end(),
                     [](const Candidate &a, const Candidate &b) { return a.score > b.score; });
    out.count = std::min<int32_t>(int32_t(cands.size()), width);
    out.scores.assign(size_t(width), kNegInf);
    out.tokens.assign(size_t(width), -1);
    out.parents.assign(size_t(width), -1);
    for (int32_t b = 0; b < out.count; ++b) {
        out.scores[size_t(b)] = cands[size_t(b)].score;
        out.tokens[size_t(b)] = cands[size_t(b)].token;
        out.parents[size_t(b)] = parent_scores ? cands[size_t(b)].row : -1;
    }
}

namespace {

// The drafted nodes so far, level by level: node (l, b) is entry b of level l's frontier.
struct DraftedLevels {
    size_t D;
    std::vector<FixedWidthFrontier> levels;
    std::vector<std::vector<float>> features;  // per level: [width][D] the nodes' output features

    // The rows of the pass over level l's frontier: every ancestor of a frontier node (level by
    // level, each level's nodes in frontier order, so parents come first), then the frontier.
    // Fills the rows' tokens, parents (row indices) and input features; returns the first
    // frontier row.
    int32_t pass_rows(int32_t l, const float *root_feature, std::vector<int32_t> &tokens,
                      std::vector<int32_t> &parents, std::vector<float> &in) const {
        const FixedWidthFrontier &front = levels[size_t(l)];
        std::vector<std::vector<char>> needed(size_t(l) + 1);
        for (int32_t k = 0; k <= l; ++k) needed[size_t(k)].assign(levels[size_t(k)].tokens.size(), 0);
        for (int32_t b = 0; b < front.count; ++b) needed[size_t(l)][size_t(b)] = 1;
        for (int32_t k = l; k > 0; --k)
            for (size_t b = 0; b < needed[size_t(k)].size(); ++b)
                if (needed[size_t(k)][b]) needed[size_t(k) - 1][size_t(levels[size_t(k)].parents[b])] = 1;
        tokens.clear(), parents.clear(), in.clear();
        std::vector<int32_t> row_prev, row_here;  // a level's node -> its row (-1: not in the pass)
        int32_t first_row = 0;
        for (int32_t k = 0; k <= l; ++k) {
            const FixedWidthFrontier &f = levels[size_t(k)];
            row_here.assign(f.tokens.size(), -1);
            if (k == l) first_row = int32_t(tokens.size());
            for (size_t b = 0; b < f.tokens.size(); ++b) {
                if (!needed[size_t(k)][b]) continue;
                row_here[b] = int32_t(tokens.size());
                tokens.push_back(f.tokens[b]);
                const int32_t p = f.parents[b];
                parents.push_back(k == 0 ? -1 : row_prev[size_t(p)]);
                const float *feature = k == 0 ? root_feature : features[size_t(k) - 1].data() + size_t(p) * D;
                in.insert(in.end(), feature, feature + D);
            }
            row_prev.swap(row_here);
        }
        return first_row;
    }
};

}  // namespace

void draft_fixed_width_by_passes(Backend &backend, SequenceState &state, const FixedWidthDraft &d) {
    const ModelConfig &c = backend.config();
    const int32_t W = d.width, m = d.catch_up_rows;
    require(W >= 1 && W <= kMaxTopTokens, SPECLA_ERR_INTERNAL, "draft_fixed_width: width ", W, " (1..",
            kMaxTopTokens, ")");
    check_fixed_width_draft(d, c.vocab_size);
    const size_t D = size_t(c.hidden_size), w = size_t(W);
    TopTokens top;
    top.k = W;
    top.n_candidates = d.n_candidates;
    if (m > 0) {
        // The catch-up advances the committed state; its last row is the root.
        std::vector<float> out(size_t(m) * D);
        RowFeatures f;
        f.in = d.catch_up_features;
        f.out = out.data();
        top.ids = d.root_ids;
        top.logp = d.root_logp;
        backend.eval_chain(state, d.catch_up_tokens, m, LogitsRows::None, nullptr, f, top);
        std::memcpy(d.root_feature, out.data() + size_t(m - 1) * D, D * sizeof(float));
    }

    DraftedLevels drafted;
    drafted.D = D;
    drafted.levels.reserve(size_t(d.levels));  // `front` below stays valid as levels are added
    drafted.levels.emplace_back();
    fixed_width_frontier(d.root_ids, d.root_logp, 1, W, nullptr, drafted.levels.back());
    std::vector<int32_t> tokens, parents;
    std::vector<float> in;
    for (int32_t l = 0; l < d.levels; ++l) {
        const FixedWidthFrontier &front = drafted.levels[size_t(l)];
        int32_t *ids = d.ids + size_t(l) * w * w;
        float *logp = d.logp + size_t(l) * w * w;
        d.counts[l] = front.count;
        std::copy(front.tokens.begin(), front.tokens.end(), d.tokens + size_t(l) * w);
        std::copy(front.parents.begin(), front.parents.end(), d.parents + size_t(l) * w);
        std::fill(ids, ids + w * w, -1);
        std::fill(logp, logp + w * w, -std::numeric_limits<float>::infinity());
        drafted.features.emplace_back(w * D, 0.f);
        if (front.count > 0) {
            const int32_t first = drafted.pass_rows(l, d.root_feature, tokens, parents, in);
            const int32_t n = int32_t(tokens.size());
            VerifyOutputs vo;
            top.ids = ids;
            top.logp = logp;
            vo.top = top;
            vo.features.in = in.data();
            vo.features.out = drafted.features.back().data();
            vo.first_row = first;
            backend.verify_tree(state, tokens.data(), parents.data(), n, TreeAlgorithm::Auto, vo);
        }
        if (l + 1 < d.levels) {
            drafted.levels.emplace_back();
            fixed_width_frontier(ids, logp, front.count, W, drafted.levels[size_t(l)].scores.data(),
                                 drafted.levels.back());
        }
    }
}

}  // namespace specla
