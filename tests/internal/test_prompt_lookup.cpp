// The prompt-lookup drafter: matching (longest n first, most recent occurrence first), trees on
// differing continuations, budgets, and the incremental index against a naive reference.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sampling/rng.h"
#include "spec/prompt_lookup.h"
#include "support/stats.h"
#include "util/error.h"

using namespace specla;

namespace {

DraftTree propose(PromptLookupDrafter &d, const std::vector<int32_t> &ctx, DraftBudget budget = DraftBudget()) {
    DraftTree t;
    d.propose(ctx, budget, t);
    return t;
}

DraftTree propose_fresh(const std::vector<int32_t> &ctx, PromptLookupParams params = {},
                        DraftBudget budget = DraftBudget()) {
    PromptLookupDrafter d(params);
    return propose(d, ctx, budget);
}

DraftTree chain(const std::vector<int32_t> &tokens) {
    DraftTree t;
    for (size_t i = 0; i < tokens.size(); ++i) t.add(tokens[i], int32_t(i) - 1);
    return t;
}

std::string show(const DraftTree &t) {
    std::string s;
    for (int32_t i = 0; i < t.size(); ++i)
        s += std::to_string(t.tokens[size_t(i)]) + "@" + std::to_string(t.parents[size_t(i)]) + " ";
    return s;
}

void check_same(const DraftTree &got, const DraftTree &want) {
    INFO("got:  ", show(got));
    INFO("want: ", show(want));
    CHECK(got.tokens == want.tokens);
    CHECK(got.parents == want.parents);
    CHECK(got.draft_dists.empty());
}

// A straightforward implementation of the documented rule, without any index: scan the context
// backwards for occurrences of the last n tokens.
DraftTree naive_propose(const std::vector<int32_t> &ctx, const PromptLookupParams &p, const DraftBudget &b) {
    DraftTree out;
    const int32_t depth = std::min(p.max_draft_len, b.max_depth);
    if (depth <= 0 || b.max_nodes <= 0) return out;
    const int64_t len = int64_t(ctx.size());
    for (int32_t n = p.max_n; n >= p.min_n; --n) {
        if (len < n + 1) continue;
        int32_t matches = 0;
        for (int64_t e = len - 1; e >= n && matches < p.max_matches; --e) {
            bool eq = true;
            for (int32_t k = 0; k < n && eq; ++k) eq = ctx[size_t(e - n + k)] == ctx[size_t(len - n + k)];
            if (!eq) continue;
            ++matches;
            std::vector<int32_t> cont;
            for (int32_t j = 0; j < depth; ++j) {
                const int64_t pos = e + j;
                cont.push_back(pos < len ? ctx[size_t(pos)] : cont[size_t(pos - len)]);
            }
            int32_t at = -1;
            bool full = false;
            for (int32_t j = 0; j < depth; ++j) {
                int32_t found = -1, count = 0;
                for (int32_t i = 0; i < out.size(); ++i)
                    if (out.parents[size_t(i)] == at) {
                        ++count;
                        if (out.tokens[size_t(i)] == cont[size_t(j)] && found < 0) found = i;
                    }
                if (found >= 0) {
                    at = found;
                    continue;
                }
                if (count >= p.max_branches) break;
                if (out.size() >= b.max_nodes) {
                    full = true;
                    break;
                }
                at = out.add(cont[size_t(j)], at);
            }
            if (full) break;
        }
        if (matches > 0) return out;
    }
    return out;
}

// Structural invariants every proposal satisfies.
void check_invariants(const DraftTree &t, const PromptLookupParams &p, const DraftBudget &b, int32_t vocab) {
    validate_tree(t.tokens.data(), t.parents.data(), t.size(), vocab);
    CHECK(t.size() <= b.max_nodes);
    const auto depth = node_depths(t.parents.data(), t.size());
    for (int32_t d : depth) CHECK(d <= std::min(p.max_draft_len, b.max_depth));
    for (int32_t parent = -1; parent < t.size(); ++parent) {
        std::vector<int32_t> kids;
        for (int32_t i = 0; i < t.size(); ++i)
            if (t.parents[size_t(i)] == parent) kids.push_back(t.tokens[size_t(i)]);
        CHECK(int32_t(kids.size()) <= p.max_branches);
        std::sort(kids.begin(), kids.end());
        CHECK(std::adjacent_find(kids.begin(), kids.end()) == kids.end());  // siblings differ
    }
}

}  // namespace

TEST_CASE("prompt lookup: a single occurrence gives its continuation as a chain") {
    // "1 2 3" occurs at the start (n = 4 has no earlier occurrence); what followed it is
    // 4 5 9 9 1 2 3 up to the end, then the text repeats (period 7): 4.
    check_same(propose_fresh({1, 2, 3, 4, 5, 9, 9, 1, 2, 3}), chain({4, 5, 9, 9, 1, 2, 3, 4}));
    // A run of one token: the occurrence overlaps the query, period 1.
    check_same(propose_fresh({7, 7, 7}), chain({7, 7, 7, 7, 7, 7, 7, 7}));
    // max_draft_len and the budget's depth cap the chain.
    PromptLookupParams short_draft;
    short_draft.max_draft_len = 3;
    check_same(propose_fresh({1, 2, 3, 4, 5, 9, 9, 1, 2, 3}, short_draft), chain({4, 5, 9}));
    DraftBudget shallow;
    shallow.max_depth = 2;
    check_same(propose_fresh({1, 2, 3, 4, 5, 9, 9, 1, 2, 3}, {}, shallow), chain({4, 5}));
}

TEST_CASE("prompt lookup: the longest n wins over a more recent shorter match") {
    // "5 6 7 8" occurred at the start (-> 20); "7 8" occurred more recently (-> 30).
    const std::vector<int32_t> ctx = {5, 6, 7, 8, 20, 0, 7, 8, 30, 1, 5, 6, 7, 8};
    check_same(propose_fresh(ctx), chain({20, 0, 7, 8, 30, 1, 5, 6}));
    // With max_n = 2 only "7 8" is looked up: both occurrences, the most recent first.
    PromptLookupParams p;
    p.max_n = 2;
    const DraftTree t = propose_fresh(ctx, p);
    REQUIRE(t.size() > 0);
    CHECK(t.tokens[0] == 30);
    CHECK(t.parents[0] == -1);
    // min_n = max_n = 3: "6 7 8" occurred once.
    p.min_n = p.max_n = 3;
    check_same(propose_fresh(ctx, p), chain({20, 0, 7, 8, 30, 1, 5, 6}));
}

TEST_CASE("prompt lookup: differing continuations make a tree, most recent first") {
    // "1 2" -> 4 (recent) and -> 3 (older).
    {
        const DraftTree t = propose_fresh({1, 2, 3, 7, 1, 2, 4, 8, 1, 2});
        DraftTree want = chain({4, 8, 1, 2, 4, 8, 1, 2});  // recent, continued periodically
        int32_t at = want.add(3, -1);                       // older: 3 7 1 2 4 8 1 2
        for (int32_t tok : {7, 1, 2, 4, 8, 1, 2}) at = want.add(tok, at);
        check_same(t, want);
    }
    // Shared prefix "3 4", branching at the first differing token.
    {
        const DraftTree t = propose_fresh({1, 2, 3, 4, 5, 1, 2, 3, 4, 6, 0, 1, 2});
        DraftTree want = chain({3, 4, 6, 0, 1, 2, 3, 4});
        int32_t at = want.add(5, 1);
        for (int32_t tok : {1, 2, 3, 4, 6}) at = want.add(tok, at);
        check_same(t, want);
    }
    // Identical continuations add nothing.
    check_same(propose_fresh({1, 2, 3, 1, 2, 3, 1, 2}), chain({3, 1, 2, 3, 1, 2, 3, 1}));
}

TEST_CASE("prompt lookup: max_branches") {
    // "1 2" -> 5 (most recent), 4, 3 (oldest).
    const std::vector<int32_t> ctx = {1, 2, 3, 1, 2, 4, 1, 2, 5, 1, 2};
    PromptLookupParams p;
    DraftBudget big;
    big.max_nodes = 64;
    auto roots = [](const DraftTree &t) {
        std::vector<int32_t> r;
        for (int32_t i = 0; i < t.size(); ++i)
            if (t.parents[size_t(i)] == -1) r.push_back(t.tokens[size_t(i)]);
        return r;
    };
    p.max_branches = 1;
    check_same(propose_fresh(ctx, p, big), chain({5, 1, 2, 5, 1, 2, 5, 1}));
    p.max_branches = 2;
    CHECK(roots(propose_fresh(ctx, p, big)) == std::vector<int32_t>{5, 4});
    p.max_branches = 3;
    const DraftTree t3 = propose_fresh(ctx, p, big);
    CHECK(roots(t3) == std::vector<int32_t>{5, 4, 3});
    CHECK(t3.size() == 24);
    check_invariants(t3, p, big, 10);
    p.max_branches = 8;  // only three distinct continuations exist
    CHECK(roots(propose_fresh(ctx, p, big)) == std::vector<int32_t>{5, 4, 3});
}

TEST_CASE("prompt lookup: node budget") {
    const std::vector<int32_t> ctx = {1, 2, 3, 7, 1, 2, 4, 8, 1, 2};
    DraftBudget b;
    b.max_nodes = 5;  // the most recent continuation alone, truncated
    check_same(propose_fresh(ctx, {}, b), chain({4, 8, 1, 2, 4}));
    b.max_nodes = 10;  // the second branch gets what is left
    {
        DraftTree want = chain({4, 8, 1, 2, 4, 8, 1, 2});
        want.add(3, -1);
        want.add(7, 8);
        check_same(propose_fresh(ctx, {}, b), want);
    }
    b.max_nodes = 64;
    b.max_depth = 3;
    {
        DraftTree want = chain({4, 8, 1});
        want.add(3, -1);
        want.add(7, 3);
        want.add(1, 4);
        check_same(propose_fresh(ctx, {}, b), want);
    }
    b.max_nodes = 0;
    CHECK(propose_fresh(ctx, {}, b).empty());
    b.max_nodes = 16;
    b.max_depth = 0;
    CHECK(propose_fresh(ctx, {}, b).empty());
}

TEST_CASE("prompt lookup: no occurrence gives an empty tree") {
    CHECK(propose_fresh({}).empty());
    CHECK(propose_fresh({1}).empty());
    CHECK(propose_fresh({1, 1}).empty());  // "1 1" has no earlier occurrence with a continuation
    CHECK(propose_fresh({1, 2, 3, 4, 5, 6}).empty());
    CHECK(propose_fresh({1, 2, 3, 4, 5, 6, 2}).empty());  // min_n = 2: a single token never matches
    PromptLookupParams unigram;
    unigram.min_n = 1;
    check_same(propose_fresh({1, 2, 3, 4, 5, 6, 2}, unigram), chain({3, 4, 5, 6, 2, 3, 4, 5}));
    // A reused drafter leaves no tree behind when it has nothing to say.
    PromptLookupDrafter d;
    DraftTree t = chain({9, 9});
    d.propose({1, 2, 3}, DraftBudget(), t);
    CHECK(t.empty());
}

TEST_CASE("prompt lookup: parameters are checked") {
    auto make = [](int32_t min_n, int32_t max_n, int32_t len, int32_t branches) {
        PromptLookupParams p;
        p.min_n = min_n, p.max_n = max_n, p.max_draft_len = len, p.max_branches = branches;
        PromptLookupDrafter d(p);
    };
    CHECK_NOTHROW(make(1, 1, 1, 1));
    CHECK_THROWS_AS(make(0, 2, 8, 2), Error);
    CHECK_THROWS_AS(make(3, 2, 8, 2), Error);
    CHECK_THROWS_AS(make(2, 4, 0, 2), Error);
    CHECK_THROWS_AS(make(2, 4, 8, 0), Error);
    try {
        make(0, 2, 8, 2);
    } catch (const Error &e) {
        CHECK(e.status() == SPECLA_ERR_INVALID_ARGUMENT);
    }
}

TEST_CASE("prompt lookup: the incremental index agrees with a rebuild and with a naive scan") {
    const uint64_t seed = test::fresh_seed();
    MESSAGE("prompt lookup random contexts: seed " << seed << " (set SPECLA_TEST_SEED to replay)");
    Rng rng(seed);
    auto below = [&](int32_t n) { return int32_t(rng.next() % uint64_t(n)); };
    for (int trial = 0; trial < 40; ++trial) {
        PromptLookupParams p;
        p.min_n = 1 + below(3);
        p.max_n = p.min_n + below(4);
        p.max_draft_len = 1 + below(10);
        p.max_branches = 1 + below(4);
        p.max_matches = 1 + below(80);
        const int32_t vocab = 2 + below(6);  // small vocabularies: many matches
        PromptLookupDrafter incremental(p);
        std::vector<int32_t> ctx;
        for (int step = 0; step < 60; ++step) {
            const int32_t action = below(20);
            if (action == 0 && !ctx.empty()) {
                ctx.resize(size_t(below(int32_t(ctx.size()))));  // shorter history (a reset)
            } else if (action == 1 && !ctx.empty()) {
                ctx.back() = (ctx.back() + 1) % vocab;  // rewritten end
            } else if (action == 2 && ctx.size() > 3) {
                ctx[0] = (ctx[0] + 1) % vocab;  // rewritten start
            } else {
                const int32_t grow = 1 + below(action == 3 ? 200 : 6);
                // Mostly repetitive text, so that long matches and branches occur.
                for (int32_t k = 0; k < grow; ++k)
                    ctx.push_back(!ctx.empty() && below(3) != 0 ? ctx[size_t(below(int32_t(ctx.size())))]
                                                                 : below(vocab));
            }
            DraftBudget b;
            b.max_nodes = 1 + below(24);
            b.max_depth = 1 + below(10);
            INFO("trial ", trial, " step ", step, " context length ", ctx.size());
            DraftTree got;
            if (below(4) == 0) incremental.observe_accepted(ctx);  // extra syncs change nothing
            incremental.propose(ctx, b, got);
            CHECK(incremental.indexed_length() == ctx.size());
            const DraftTree rebuilt = propose_fresh(ctx, p, b);
            const DraftTree naive = naive_propose(ctx, p, b);
            check_same(got, rebuilt);
            check_same(got, naive);
            check_invariants(got, p, b, vocab);
        }
    }
}

TEST_CASE("prompt lookup: long context, incremental growth") {
    // A 200k-token history grown a few tokens at a time stays cheap (no rescans), and matches
    // far back are found.
    PromptLookupDrafter d;
    std::vector<int32_t> ctx;
    Rng rng(7);
    for (int32_t i = 0; i < 200000; ++i) ctx.push_back(int32_t(rng.next() % 50000));
    const std::vector<int32_t> phrase(ctx.begin() + 1000, ctx.begin() + 1012);
    DraftTree t;
    d.propose(ctx, DraftBudget(), t);
    for (int step = 0; step < 2000; ++step) {
        ctx.push_back(int32_t(rng.next() % 50000));
        d.propose(ctx, DraftBudget(), t);
    }
    // Quote the phrase's first 4 tokens: the drafter proposes the next 8 tokens of it.
    ctx.insert(ctx.end(), phrase.begin(), phrase.begin() + 4);
    d.propose(ctx, DraftBudget(), t);
    CHECK(d.indexed_length() == ctx.size());
    REQUIRE(t.size() >= 8);
    for (int32_t j = 0; j < 8; ++j) {
        CHECK(t.tokens[size_t(j)] == phrase[size_t(4 + j)]);
        CHECK(t.parents[size_t(j)] == j - 1);
    }
}
