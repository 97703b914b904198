#include "spec/speculative.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "generate/rng.h"
#include "spec/accept.h"
#include "util/error.h"
#include "util/seconds_since.h"

namespace specla {
namespace {

// Verify and accept. Greedy acceptance needs only the target's argmax per row (a GPU backend then
// copies no logits) unless the sampler restricts the candidates (the backend's argmax is over the
// whole vocabulary); sampling needs the logits.
// features: where the pass's features go (root row, then one per node), for drafters that read
// them; null: none.
void step_verify_accept(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                        TreeAlgorithm algorithm, bool need_logits, std::vector<float> &root, std::vector<float> &nodes,
                        std::vector<int32_t> &choice, AcceptResult &acc, std::vector<float> *features = nullptr) {
    const size_t vocab = size_t(session.config().vocab_size), n = size_t(tree.size());
    Session::VerifyBuffers buf;
    if (features) {
        const size_t D = size_t(session.config().hidden_size);
        features->resize((n + 1) * D);
        buf.root_features = features->data();
        buf.node_features = features->data() + D;
    }
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
    // A drafter that reads the target's features gets the feature of every token the target
    // consumes, in order (spec/eagle_drafter.md): the prompt's rows, then each verification's root
    // (the pending token) and accepted path.
    const bool features = drafter.wants_features();
    const size_t D = size_t(session.config().hidden_size);
    std::vector<float> feature_rows;
    if (n_prompt > 0) {
        // All but the last prompt token as one block; the last one leads the first verification.
        if (n_prompt > 1) {
            // A pending token of an earlier call is fed first, without a feature: the prompt's
            // rows start at the current end of the context.
            const int64_t first = session.n_past();
            if (features) feature_rows.resize((n_prompt - 1) * D);
            session.eval(prompt, n_prompt - 1, LogitsRows::None, nullptr, features ? feature_rows.data() : nullptr);
            if (features) drafter.observe_features(first, feature_rows.data(), int32_t(n_prompt - 1));
        }
        session.set_pending(prompt[n_prompt - 1]);
    }
    if (g.max_tokens == 0) return out;
    Rng rng(g.seed);
    struct GenerationScope {
        Drafter &d;
        ~GenerationScope() { d.end_generation(); }
    } scope{drafter};
    drafter.begin_generation(g.sampling, &rng);
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
        // A drafter that reads features is verified always: the pass returns the pending token's
        // feature, which a decoding step would not.
        const bool plain_step = tree.size() == 0 && session.has_pending() && !features;
        AcceptResult acc;
        std::vector<int32_t> emit;
        const bool root_feature = session.has_pending();
        const int64_t first_feature_position = session.n_past() - (root_feature ? 1 : 0);
        if (plain_step) {
            emit.push_back(session.sample_next(g.sampling, rng.uniform()));
        } else {
            const auto t0 = std::chrono::steady_clock::now();
            step_verify_accept(session, tree, g.sampling, rng, opts.algorithm, false, root, node_logits, node_choice,
                               acc, features ? &feature_rows : nullptr);
            drafter.observe_verify_pass(tree.size(), seconds_since(t0));
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
        if (features) {
            // The committed rows: the root (the pending token, when it led the pass) and the kept
            // path, compacted in place (path nodes increase, so every source lies at or after its
            // destination).
            std::vector<float> &f = feature_rows;
            size_t rows = 0;
            if (root_feature) ++rows;  // row 0 is the root's already
            for (int32_t node : kept_path) {
                std::memmove(f.data() + rows * D, f.data() + (size_t(node) + 1) * D, D * sizeof(float));
                ++rows;
            }
            drafter.observe_features(first_feature_position, f.data(), int32_t(rows));
        }
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
