// Fuzz target: the arguments of specla_session_verify_tree (the verification primitive a caller
// with its own drafter feeds) on the tiny fixture model tests/fixtures/gdn_tiny_a, loaded once.
// Each input creates a session (fuzzed max_tree_nodes), optionally evaluates a short prompt, then
// runs up to three verification steps with fuzzed tokens, parents, n_nodes, drafter
// distributions (with NaN, infinities, negatives and denormals), sampling parameters,
// deferred_commit and the tree algorithm (also one that does not exist). Besides sanitizer
// reports, a finding is: a refusal that is not a clean status, an accepted path that is not a
// root-to-leaf path of the tree, a bonus token outside the vocabulary, non-finite target logits,
// or a session that cannot evaluate a token afterwards (bad arguments must leave it usable).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fuzz_support.h"

namespace {

specla_model *fixture_model() {
    static specla_model *model = [] {
        specla_model_params p = specla_model_default_params();
        p.n_threads = 1;
        specla_model *m = nullptr;
        if (specla_model_load(SPECLA_FUZZ_MODEL_DIR, &p, &m) != SPECLA_OK)
            fuzz::finding(std::string("cannot load the fixture model: ") + specla_last_error());
        return m;
    }();
    return model;
}

// Mostly ids in the vocabulary, sometimes any 32-bit value.
int32_t pick_token(FuzzedDataProvider &fdp, int32_t vocab) {
    if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) return fdp.ConsumeIntegral<int32_t>();
    return fdp.ConsumeIntegralInRange<int32_t>(0, vocab - 1);
}

// Values that break naive arithmetic, or any bit pattern.
float pick_float(FuzzedDataProvider &fdp, float usual_lo, float usual_hi) {
    static const float special[] = {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::denorm_min(),
                                    std::numeric_limits<float>::min(), 1e-30f, 1e30f,
                                    std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                                    -std::numeric_limits<float>::infinity(),
                                    std::numeric_limits<float>::quiet_NaN()};
    switch (fdp.ConsumeIntegralInRange<int>(0, 3)) {
        case 0: return fdp.PickValueInArray(special);
        case 1: {
            const uint32_t bits = fdp.ConsumeIntegral<uint32_t>();
            float f;
            std::memcpy(&f, &bits, sizeof f);
            return f;
        }
        default: return fdp.ConsumeFloatingPointInRange<float>(usual_lo, usual_hi);
    }
}

specla_sampling_params pick_sampling(FuzzedDataProvider &fdp) {
    specla_sampling_params s = specla_sampling_default_params();
    if (fdp.ConsumeBool()) return s;  // greedy
    s.temperature = pick_float(fdp, 0.0f, 2.0f);
    s.top_k = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int32_t>(-1, 600) : fdp.ConsumeIntegral<int32_t>();
    s.top_p = pick_float(fdp, 0.0f, 1.0f);
    s.seed = fdp.ConsumeIntegral<uint64_t>();
    return s;
}

// A drafter distribution per node: a fuzzed base row (uniform, one-hot or spread) with a few
// fuzzed entries overwritten, so that rows need only a few bytes of input each.
std::vector<float> pick_draft_dists(FuzzedDataProvider &fdp, size_t n_nodes, size_t vocab,
                                    const std::vector<int32_t> &tokens) {
    std::vector<float> d(n_nodes * vocab);
    for (size_t i = 0; i < n_nodes; ++i) {
        float *row = d.data() + i * vocab;
        switch (fdp.ConsumeIntegralInRange<int>(0, 2)) {
            case 0: std::fill(row, row + vocab, 1.0f / float(vocab)); break;
            case 1:
                if (tokens[i] >= 0 && size_t(tokens[i]) < vocab) row[tokens[i]] = 1.0f;
                break;
            default:
                for (size_t v = 0; v < vocab; ++v) row[v] = float((v * 2654435761u + i) % 97) / (97.0f * vocab / 2);
        }
        const int edits = fdp.ConsumeIntegralInRange<int>(0, 3);
        for (int e = 0; e < edits; ++e)
            row[fdp.ConsumeIntegralInRange<size_t>(0, vocab - 1)] = pick_float(fdp, -1.0f, 2.0f);
    }
    return d;
}

void check_path(const std::vector<int32_t> &parents, const int32_t *accepted, size_t n_accepted) {
    int32_t expected_parent = -1;
    for (size_t k = 0; k < n_accepted; ++k) {
        const int32_t node = accepted[k];
        if (node < 0 || size_t(node) >= parents.size())
            fuzz::finding("accepted node " + std::to_string(node) + " is not in the tree");
        if (parents[size_t(node)] != expected_parent)
            fuzz::finding("accepted nodes are not a root-to-leaf path");
        expected_parent = node;
    }
}

void check_usable(specla_session *s) {
    const int32_t token = 3;
    if (specla_session_eval(s, &token, 1, SPECLA_LOGITS_NONE, nullptr, 0) != SPECLA_OK)
        fuzz::finding(std::string("session unusable after verify_tree: ") + specla_last_error());
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int *, char ***) {
    fixture_model();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    FuzzedDataProvider fdp(data, size);
    specla_model *model = fixture_model();
    specla_model_info info{};
    info.struct_size = sizeof info;
    specla_model_get_info(model, &info);
    const size_t vocab = size_t(info.vocab_size);

    specla_session_params sp = specla_session_default_params();
    sp.max_tree_nodes = fdp.ConsumeIntegralInRange<int32_t>(0, 40);
    specla_session *session = nullptr;
    const specla_status created = specla_session_create(model, &sp, &session);
    if (created != SPECLA_OK) {
        fuzz::check_refusal(created, specla_last_error());
        return 0;
    }

    std::vector<int32_t> prompt(fdp.ConsumeIntegralInRange<size_t>(0, 6));
    for (int32_t &t : prompt) t = fdp.ConsumeIntegralInRange<int32_t>(0, int32_t(vocab) - 1);
    if (!prompt.empty() &&
        specla_session_eval(session, prompt.data(), prompt.size(), SPECLA_LOGITS_NONE, nullptr, 0) != SPECLA_OK)
        fuzz::finding(std::string("prompt evaluation failed: ") + specla_last_error());

    const int steps = fdp.ConsumeIntegralInRange<int>(1, 3);
    for (int step = 0; step < steps && fdp.remaining_bytes() > 0; ++step) {
        const size_t n_nodes = fdp.ConsumeIntegralInRange<size_t>(0, size_t(sp.max_tree_nodes) + 2);
        std::vector<int32_t> tokens(n_nodes), parents(n_nodes);
        for (size_t i = 0; i < n_nodes; ++i) {
            tokens[i] = pick_token(fdp, int32_t(vocab));
            // Mostly a valid parent (an earlier node or -1), sometimes anything.
            parents[i] = fdp.ConsumeIntegralInRange<int>(0, 15) == 0
                             ? fdp.ConsumeIntegral<int32_t>()
                             : fdp.ConsumeIntegralInRange<int32_t>(-1, int32_t(i) - 1);
        }
        std::vector<float> dists;
        if (fdp.ConsumeBool()) dists = pick_draft_dists(fdp, n_nodes, vocab, tokens);
        const specla_sampling_params sampling = pick_sampling(fdp);
        specla_verify_params vp = specla_verify_default_params();
        vp.sampling = &sampling;
        vp.deferred_commit = fdp.ConsumeBool();
        vp.tree_algorithm = specla_tree_algorithm(fdp.ConsumeIntegralInRange<int>(0, 3));  // 3: not an algorithm
        const bool want_logits = fdp.ConsumeBool();

        std::vector<int32_t> accepted(n_nodes);
        std::vector<float> logits(want_logits ? n_nodes * vocab : 0);
        size_t n_accepted = 0;
        int32_t bonus = -1;
        const specla_status st = specla_session_verify_tree(
            session, tokens.data(), parents.data(), n_nodes, dists.empty() ? nullptr : dists.data(), &vp,
            accepted.data(), &n_accepted, &bonus, want_logits ? logits.data() : nullptr);
        if (st != SPECLA_OK) {
            fuzz::check_refusal(st, specla_last_error());
            continue;
        }
        if (n_accepted > n_nodes) fuzz::finding("more accepted nodes than the tree has");
        check_path(parents, accepted.data(), n_accepted);
        if (bonus < 0 || size_t(bonus) >= vocab) fuzz::finding("bonus token " + std::to_string(bonus) + " outside the vocabulary");
        for (float x : logits)
            if (!std::isfinite(x)) fuzz::finding("non-finite target logit");
    }
    check_usable(session);
    specla_session_free(session);
    return 0;
}
