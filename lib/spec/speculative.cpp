#include "spec/speculative.h"

#include <algorithm>

#include "generate/rng.h"
#include "spec/accept.h"
#include "util/error.h"

namespace specla {
namespace {

// Verify and accept. Greedy acceptance needs only the target's argmax per row (a GPU backend then
// copies no logits) unless the sampler restricts the candidates (the backend's argmax is over the
// whole vocabulary); sampling needs the logits.
void step_verify_accept(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                        TreeAlgorithm algorithm, bool need_logits, std::vector<float> &root, std::vector<float> &nodes,
                        std::vector<int32_t> &choice, AcceptResult &acc) {
    const size_t vocab = size_t(session.config().vocab_size), n = size_t(tree.size());
    Session::VerifyBuffers buf;
    if (sampling.greedy() && !sampling.restricts(int32_t(vocab)) && !need_logits) {
        int32_t root_choice = -1;
        choice.resize(n);
        buf.root_argmax = &root_choice;
        buf.node_argmax = choice.data();
        session.verify(tree, algorithm, buf);
        acc = accept_greedy_choices(tree, root_choice, choice.data());
        return;
    }
    root.resize(vocab);
    nodes.resize(n * vocab);
    buf.root_logits = root.data();
    buf.node_logits = nodes.data();
    session.verify(tree, algorithm, buf);
    acc = accept_sampled(tree, root.data(), nodes.data(), int32_t(vocab), sampling, rng);  // greedy when it is
}

}  // namespace

StepResult verify_accept_commit(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                                bool deferred, TreeAlgorithm algorithm, bool keep_logits) {
    StepResult r;
    std::vector<float> root;
    std::vector<int32_t> node_choice;
    step_verify_accept(session, tree, sampling, rng, algorithm, keep_logits, root, r.node_logits, node_choice, r.accept);
    session.commit(r.accept.path, r.accept.bonus, deferred);
    if (!keep_logits) r.node_logits.clear();
    return r;
}

std::vector<int32_t> generate_speculative(Session &session, Drafter &drafter, const int32_t *prompt, size_t n_prompt,
                                          const SpecOptions &opts, SpecStats &stats) {
    const GenerateOptions &g = opts.gen;
    require(g.max_tokens >= 0, SPECLA_ERR_INVALID_ARGUMENT, "max_tokens must not be negative");
    require(opts.budget.max_nodes >= 0 && opts.budget.max_depth >= 0, SPECLA_ERR_INVALID_ARGUMENT,
            "draft budget must not be negative");
    validate_tokens(session.config(), prompt, n_prompt);
    std::vector<int32_t> out;
    if (n_prompt > 0) {
        // All but the last prompt token as one block; the last one leads the first verification.
        if (n_prompt > 1) session.eval(prompt, n_prompt - 1, LogitsRows::None, nullptr);
        session.set_pending(prompt[n_prompt - 1]);
    }
    if (g.max_tokens == 0) return out;
    Rng rng(g.seed);
    DraftTree tree;
    std::vector<float> root, node_logits;
    std::vector<int32_t> node_choice;
    bool done = false;
    while (!done) {
        const int32_t remaining = g.max_tokens - int32_t(out.size());
        DraftBudget budget = opts.budget;
        budget.max_nodes = std::min(budget.max_nodes, session.limits().max_tree_nodes);
        budget.max_depth = std::min(budget.max_depth, remaining - 1);  // path + bonus fit the budget
        tree.clear();
        if (budget.max_nodes > 0 && budget.max_depth > 0) drafter.propose(session.context(), budget, tree);

        // Nothing drafted: the pass is a plain decoding step of the pending token, through the
        // backend's decoding path (on the GPU a captured graph; prompt lookup on gdn-pycode-22m,
        // H200: 0.84-0.90x -> 0.95-1.05x plain decoding,
        // bench/journal/2026-11-30-empty-draft-as-decode-step.md), giving the same token: greedy,
        // the same logits (bitwise on the GPU, where verified rows equal decoding steps); sampled,
        // a draw from the target's own distribution, which is what acceptance of an empty draft
        // draws from.
        const bool plain_step = tree.size() == 0 && session.has_pending();
        AcceptResult acc;
        std::vector<int32_t> emit;
        if (plain_step) {
            emit.push_back(session.sample_next(g.sampling, rng.uniform()));
        } else {
            step_verify_accept(session, tree, g.sampling, rng, opts.algorithm, false, root, node_logits, node_choice,
                               acc);
            for (int32_t node : acc.path) emit.push_back(tree.tokens[size_t(node)]);
            emit.push_back(acc.bonus);
        }
        // Emit path tokens then the bonus, stopping at the first stop condition; the state keeps
        // exactly what was emitted (the last emitted token becomes the pending one).
        size_t m = 0;
        while (m < emit.size()) {
            const int32_t t = emit[m++];
            out.push_back(t);
            const bool keep_going = !g.on_token || g.on_token(t);
            if (!keep_going || t == g.eos_token || int32_t(out.size()) >= g.max_tokens) {
                done = true;
                break;
            }
        }
        const std::vector<int32_t> kept_path(acc.path.begin(), acc.path.begin() + long(m - 1));
        if (plain_step) session.set_pending(emit[0]);
        else session.commit(kept_path, emit[m - 1], opts.deferred_commit);
        drafter.observe_accepted(session.context());

        ++stats.steps;
        stats.drafted += tree.size();
        stats.accepted += int64_t(kept_path.size());
        stats.generated += int64_t(m);
        const std::vector<int32_t> depth = node_depths(tree.parents.data(), tree.size());
        for (int32_t d : depth)
            if (d - 1 < kSpecMaxDepthStats) ++stats.drafted_at_depth[d - 1];
        for (size_t d = 0; d < kept_path.size() && d < size_t(kSpecMaxDepthStats); ++d) ++stats.accepted_at_depth[d];
    }
    return out;
}

}  // namespace specla
