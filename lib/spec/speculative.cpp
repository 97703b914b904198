#include "spec/speculative.h"

#include "spec/accept.h"

namespace specla {

void verify_and_accept(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                       TreeAlgorithm algorithm, bool need_logits, std::vector<float> &root, std::vector<float> &nodes,
                       std::vector<int32_t> &choice, AcceptResult &acc, std::vector<float> *features) {
    const size_t vocab = size_t(session.config().vocab_size), n = size_t(tree.size());
    Session::VerifyBuffers buf;
    if (features) {
        const size_t D = size_t(session.config().hidden_size);
        features->resize((n + 1) * D);
        buf.root_features = features->data();
        buf.node_features = features->data() + D;
    }
    // The backend's per-row argmax is the greedy choice unless the choice reads more than the
    // row (candidates, logit bias, penalties of each node's history): then the logits come to
    // the host (on the GPU: n + 1 vocab-wide rows instead of n + 1 ids).
    if (sampling.greedy() && !sampling.restricts(int32_t(vocab)) && !sampling.transforms() && !need_logits) {
        int32_t root_choice = -1;
        choice.resize(n);
        buf.root_argmax = &root_choice;
        buf.node_argmax = choice.data();
        session.verify(tree, algorithm, buf);
        acc = accept_greedy_choices(tree, root_choice, choice.data());
        return;
    }
    // Sampled, one-hot proposals (no drafter distributions), a config the backend's own sampler
    // covers: the same rule where the logits are (on the GPU: a few bytes per position reached
    // instead of n + 1 vocab-wide rows).
    // (The rule over rows reads no history: configs whose distribution depends on it stay on the
    // host whatever a backend offers.)
    if (!sampling.greedy() && tree.draft_dists.empty() && !need_logits && !sampling.needs_host_sampler(int32_t(vocab))) {
        if (std::unique_ptr<RowSampler> rows = session.row_sampler(sampling)) {
            session.verify(tree, algorithm, buf);
            acc = accept_sampled_rows(tree, *rows, int32_t(vocab), 0, 1, rng);
            return;
        }
    }
    root.resize(vocab);
    nodes.resize(n * vocab);
    buf.root_logits = root.data();
    buf.node_logits = nodes.data();
    session.verify(tree, algorithm, buf);
    // The root's history is the context (with the pending token, which led the pass); a node's
    // adds its path (accept_sampled).
    acc = accept_sampled(tree, root.data(), nodes.data(), int32_t(vocab), sampling, rng,
                         History::of(session.context()));  // greedy when it is
}

StepResult verify_accept_commit(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                                bool deferred, TreeAlgorithm algorithm, bool keep_logits) {
    StepResult r;
    std::vector<float> root;
    std::vector<int32_t> node_choice;
    verify_and_accept(session, tree, sampling, rng, algorithm, keep_logits, root, r.node_logits, node_choice, r.accept);
    session.commit(r.accept.path, r.accept.bonus, deferred);
    if (!keep_logits) r.node_logits.clear();
    return r;
}


}  // namespace specla
