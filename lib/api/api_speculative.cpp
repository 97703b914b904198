// C API: drafters, speculative generation, and the tree verification primitive.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "api/caller_enum.h"
#include "api/checked_size.h"
#include "api/guard.h"
#include "api/handles.h"
#include "api/params.h"
#include "api/struct_size.h"
#include "sampling/rng.h"
#include "generate/generation.h"
#include "session/session.h"
#include "spec/eagle_drafter.h"
#include "spec/prompt_lookup.h"
#include "spec/speculative.h"
#include "tokenizer/tokenizer.h"

using namespace specla;

namespace {

TreeAlgorithm algorithm_from(const specla_tree_algorithm &field) {
    switch (caller_enum(field)) {
        case SPECLA_TREE_AUTO: return TreeAlgorithm::Auto;
        case SPECLA_TREE_HYBRID: return TreeAlgorithm::Hybrid;
        case SPECLA_TREE_PARALLEL_WY: return TreeAlgorithm::ParallelWY;
    }
    fail(SPECLA_ERR_INVALID_ARGUMENT, "unknown tree algorithm ", caller_enum(field));
}

TreeShape tree_shape_from(const specla_tree_shape &field) {
    switch (caller_enum(field)) {
        case SPECLA_TREE_SHAPE_AUTO: return TreeShape::Auto;
        case SPECLA_TREE_SHAPE_DYNAMIC: return TreeShape::Dynamic;
        case SPECLA_TREE_SHAPE_FIXED_WIDTH: return TreeShape::FixedWidth;
    }
    fail(SPECLA_ERR_INVALID_ARGUMENT, "unknown tree shape ", caller_enum(field));
}

specla_drafter_params drafter_defaults() {
    specla_drafter_params p{};
    p.struct_size = sizeof p;
    p.type = SPECLA_DRAFTER_PROMPT_LOOKUP;
    p.min_ngram = 2;
    p.max_ngram = 4;
    p.max_draft_len = 8;
    p.max_branches = 2;
    p.path = nullptr;
    return p;
}

specla_spec_params spec_defaults() {
    specla_spec_params p{};
    p.struct_size = sizeof p;
    p.generate = nullptr;
    p.max_draft_nodes = 4;
    p.max_draft_depth = 8;
    p.tree_algorithm = SPECLA_TREE_AUTO;
    p.deferred_commit = true;
    p.tree_top_k = 4;
    p.tree_prune_margin = 8.f;
    p.tree_size_from_cost = true;
    p.speculation_min_gain = 1.0;
    p.tree_shape = SPECLA_TREE_SHAPE_AUTO;
    return p;
}

specla_verify_params verify_defaults() {
    specla_verify_params p{};
    p.struct_size = sizeof p;
    p.sampling = nullptr;
    p.deferred_commit = true;
    p.tree_algorithm = SPECLA_TREE_AUTO;
    return p;
}

}  // namespace

namespace specla {

SpecArgs read_spec_params(const specla_spec_params *caller) {
    SpecArgs a;
    a.spec = read_params(caller, spec_defaults(), "specla_spec_params");
    a.generate = read_generate_params(a.spec.generate);
    a.spec.generate = nullptr;  // the caller's pointer is not kept beyond the read
    return a;
}

void fill_stats(const SpecStats &s, specla_spec_stats *out) {
    if (!out) return;
    specla_spec_stats r{};
    r.steps = s.steps;
    r.drafted = s.drafted;
    r.accepted = s.accepted;
    r.generated = s.generated;
    r.mean_accepted_length = s.steps ? double(s.generated - s.plain_steps) / double(s.steps) : 0.0;
    r.acceptance_rate = s.drafted ? double(s.accepted) / double(s.drafted) : 0.0;
    static_assert(SPECLA_SPEC_MAX_DEPTH_STATS == kSpecMaxDepthStats, "depth statistics sizes differ");
    std::copy(s.drafted_at_depth, s.drafted_at_depth + kSpecMaxDepthStats, r.drafted_at_depth);
    std::copy(s.accepted_at_depth, s.accepted_at_depth + kSpecMaxDepthStats, r.accepted_at_depth);
    r.seed = s.seed;
    r.plain_steps = s.plain_steps;
    write_info(out, r, "specla_spec_stats");
}

SpecOptions spec_options(const specla_session *session, const specla_drafter *drafter, const SpecArgs &args) {
    const specla_spec_params &p = args.spec;
    require_arg(drafter, "drafter");
    require(drafter->model == session->model, SPECLA_ERR_INVALID_ARGUMENT,
            "the drafter was created for another model than the session's");
    require(p.max_draft_nodes >= 0 && p.max_draft_depth >= 0, SPECLA_ERR_INVALID_ARGUMENT,
            "max_draft_nodes and max_draft_depth must not be negative");
    require(p.tree_top_k >= 1 && p.tree_top_k <= SPECLA_LIMIT_DRAFT_TOP_K, SPECLA_ERR_INVALID_ARGUMENT,
            "tree_top_k must be in [1, SPECLA_LIMIT_DRAFT_TOP_K = ", SPECLA_LIMIT_DRAFT_TOP_K, "], got ", p.tree_top_k);
    require(!std::isnan(p.tree_prune_margin), SPECLA_ERR_INVALID_ARGUMENT, "tree_prune_margin must not be NaN");
    require(std::isfinite(p.speculation_min_gain) && p.speculation_min_gain >= 0, SPECLA_ERR_INVALID_ARGUMENT,
            "speculation_min_gain must be finite and >= 0 (0: always speculate), got ", p.speculation_min_gain);
    SpecOptions opts;
    opts.gen = generate_options(session, args.generate);
    opts.budget.max_nodes = p.max_draft_nodes;
    opts.budget.max_depth = p.max_draft_depth;
    opts.budget.top_k = p.tree_top_k;
    opts.budget.prune_margin = p.tree_prune_margin;
    opts.budget.size_from_cost = p.tree_size_from_cost;
    opts.budget.shape = tree_shape_from(p.tree_shape);
    opts.algorithm = algorithm_from(p.tree_algorithm);
    opts.deferred_commit = p.deferred_commit;
    opts.speculation_min_gain = p.speculation_min_gain;
    return opts;
}

}  // namespace specla

namespace {

GenerationResult run_speculative(specla_session *session, specla_drafter *drafter, const int32_t *prompt,
                                 size_t n_prompt, const SpecArgs &p, specla_spec_stats *stats_out) {
    require_no_generation(session, drafter);
    TextOptions text = text_options(session, p.generate);
    const SpecOptions opts = spec_options(session, drafter, p);
    require_no_logprobs(opts.gen);
    GenerationResult r = run_generation(*session->impl, drafter->impl.get(), prompt, n_prompt, opts, std::move(text));
    fill_stats(r.stats, stats_out);
    return r;
}

}  // namespace

extern "C" {

SPECLA_API specla_status specla_drafter_params_init(specla_drafter_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, drafter_defaults(), "specla_drafter_params"); });
}

SPECLA_API specla_status specla_spec_params_init(specla_spec_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, spec_defaults(), "specla_spec_params"); });
}

SPECLA_API specla_status specla_verify_params_init(specla_verify_params *params, size_t struct_size) {
    return guarded([&] { init_params(params, struct_size, verify_defaults(), "specla_verify_params"); });
}

SPECLA_API specla_status specla_drafter_create(const specla_model *model, const specla_drafter_params *caller_params,
                                               specla_drafter **out) {
    if (out) *out = nullptr;
    return guarded([&] {
        require_arg(model, "model");
        require_arg(out, "out");
        const specla_drafter_params params = read_params(caller_params, drafter_defaults(), "specla_drafter_params");
        auto handle = std::make_unique<specla_drafter>();
        const int type = caller_enum(params.type);
        if (type == SPECLA_DRAFTER_EAGLE) {
            require(params.path != nullptr, SPECLA_ERR_INVALID_ARGUMENT,
                    "an EAGLE drafter needs specla_drafter_params.path, the drafter folder");
            handle->impl = EagleDrafter::load(params.path, *model->impl);
        } else {
            require(type == SPECLA_DRAFTER_PROMPT_LOOKUP, SPECLA_ERR_INVALID_ARGUMENT, "unknown drafter type ", type);
            require(params.min_ngram >= 1 && params.max_ngram >= params.min_ngram, SPECLA_ERR_INVALID_ARGUMENT,
                    "prompt lookup needs 1 <= min_ngram <= max_ngram (got ", params.min_ngram, ", ", params.max_ngram,
                    ")");
            require(params.max_ngram <= 64, SPECLA_ERR_INVALID_ARGUMENT, "max_ngram must be at most 64, got ",
                    params.max_ngram);
            require(params.max_draft_len >= 1 && params.max_branches >= 1, SPECLA_ERR_INVALID_ARGUMENT,
                    "max_draft_len and max_branches must be at least 1");
            PromptLookupParams pl;
            pl.min_n = params.min_ngram;
            pl.max_n = params.max_ngram;
            pl.max_draft_len = params.max_draft_len;
            pl.max_branches = params.max_branches;
            handle->impl = std::make_unique<PromptLookupDrafter>(pl);
        }
        handle->model = model;
        *out = handle.release();
    });
}

SPECLA_API void specla_drafter_free(specla_drafter *drafter) {
    if (drafter) end_generation(drafter->generation);  // a generation still using it lets go first
    delete drafter;
}

SPECLA_API specla_status specla_generate_speculative(specla_session *session, specla_drafter *drafter,
                                                     const int32_t *prompt, size_t n_prompt,
                                                     const specla_spec_params *caller_params, int32_t *out_tokens,
                                                     size_t out_capacity, size_t *n_out, specla_spec_stats *stats) {
    if (n_out) *n_out = 0;
    return guarded([&] {
        const SpecArgs params = read_spec_params(caller_params);
        check_generate_args(session, prompt, n_prompt, out_tokens, out_capacity, params.generate.generate.max_tokens);
        const GenerationResult r = run_speculative(session, drafter, prompt, n_prompt, params, stats);
        if (out_tokens) std::copy(r.tokens.begin(), r.tokens.end(), out_tokens);
        if (n_out) *n_out = r.tokens.size();
    });
}

SPECLA_API specla_status specla_generate_speculative_text(specla_session *session, specla_drafter *drafter,
                                                          const char *prompt, const specla_spec_params *caller_params,
                                                          char **out_text, size_t *n_generated,
                                                          specla_spec_stats *stats) {
    if (out_text) *out_text = nullptr;
    if (n_generated) *n_generated = 0;
    return guarded([&] {
        const SpecArgs params = read_spec_params(caller_params);
        require_arg(session, "session");
        require_arg(prompt, "prompt");
        require_no_generation(session, drafter);
        const std::vector<int32_t> ids = encode_text_prompt(session, prompt, std::strlen(prompt));
        const GenerationResult r = run_speculative(session, drafter, ids.data(), ids.size(), params, stats);
        if (out_text) *out_text = library_string(r.text);
        if (n_generated) *n_generated = r.tokens.size();
    });
}

SPECLA_API specla_status specla_session_verify_tree(specla_session *session, const int32_t *tokens,
                                                    const int32_t *parents, size_t n_nodes, const float *draft_dists,
                                                    const specla_verify_params *caller_params, int32_t *accepted_nodes,
                                                    size_t *n_accepted, int32_t *bonus_token, float *node_logits) {
    if (n_accepted) *n_accepted = 0;
    return guarded([&] {
        const specla_verify_params params = read_params(caller_params, verify_defaults(), "specla_verify_params");
        const specla_sampling_params sampling = read_sampling_params(params.sampling);
        const TreeAlgorithm algorithm = algorithm_from(params.tree_algorithm);
        require_arg(session, "session");
        require_no_generation(session);
        require_arg(n_accepted, "n_accepted");
        require_arg(bonus_token, "bonus_token");
        if (n_nodes) {
            require_arg(tokens, "tokens");
            require_arg(parents, "parents");
            require_arg(accepted_nodes, "accepted_nodes");
        }
        Session &s = *session->impl;
        require(n_nodes <= size_t(s.limits().max_tree_nodes), SPECLA_ERR_INVALID_ARGUMENT, "draft tree of ", n_nodes,
                " nodes exceeds the session's max_tree_nodes (", s.limits().max_tree_nodes, ")");
        const SamplingConfig cfg = sampling_for(session, sampling);
        const size_t vocab = size_t(s.config().vocab_size);
        const size_t dist_floats = checked_product(n_nodes, vocab, "n_nodes x vocab_size");
        DraftTree tree;
        tree.tokens.assign(tokens, tokens + n_nodes);
        tree.parents.assign(parents, parents + n_nodes);
        if (draft_dists) tree.draft_dists.assign(draft_dists, draft_dists + dist_floats);
        Rng rng(seed_for(sampling.seed));
        StepResult r =
            verify_accept_commit(s, tree, cfg, rng, params.deferred_commit, algorithm, node_logits != nullptr);
        std::copy(r.accept.path.begin(), r.accept.path.end(), accepted_nodes);
        *n_accepted = r.accept.path.size();
        *bonus_token = r.accept.bonus;
        if (node_logits) std::memcpy(node_logits, r.node_logits.data(), r.node_logits.size() * sizeof(float));
    });
}

}  // extern "C"
