// Speculative decoding's pass: the drafter proposes a tree after the context, the target
// verifies all of it in one pass, the acceptance rule keeps a path plus the target's own next
// token, and the path is committed from the verification's factors. The generation loop that
// runs passes is lib/generate/generation.h; generate_speculative() (lib/generate/generate.h) runs
// it to completion.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend.h"
#include "engine/draft_tree.h"
#include "sampling/rng.h"
#include "session/session.h"
#include "spec/accept.h"
#include "spec/drafter.h"

namespace specla {

// Verify a tree and accept (the session's state is not changed; commit follows). Greedy
// acceptance needs only the target's argmax per row (a GPU backend then copies no logits) unless
// the sampler restricts the candidates or need_logits; sampling needs the logits. root, nodes,
// choice: scratch the caller reuses. features (may be null): where the pass's features go, the
// root row then one per node, for drafters that read them.
void verify_and_accept(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                       TreeAlgorithm algorithm, bool need_logits, std::vector<float> &root, std::vector<float> &nodes,
                       std::vector<int32_t> &choice, AcceptResult &acc, std::vector<float> *features = nullptr);

// One verification step on a given tree (the low-level primitive): verify, accept with the
// sampler (greedy or lossless sampling), commit the path, leave the bonus pending.
struct StepResult {
    AcceptResult accept;
    std::vector<float> node_logits;  // n x vocab, filled when keep_logits
};
StepResult verify_accept_commit(Session &session, const DraftTree &tree, const SamplingConfig &sampling, Rng &rng,
                                bool deferred, TreeAlgorithm algorithm, bool keep_logits);

}  // namespace specla
