#include "engine/backend.h"

#include "util/error.h"

namespace specla {

void Backend::verify_tree(SequenceState &, const int32_t *, const int32_t *, int32_t, TreeAlgorithm,
                          const VerifyOutputs &) {
    fail(SPECLA_ERR_UNSUPPORTED, "speculative verification is not available on this backend yet");
}

void Backend::commit_path(SequenceState &, const int32_t *, int32_t, bool) {
    fail(SPECLA_ERR_UNSUPPORTED, "speculative commit is not available on this backend yet");
}

void Backend::flush_commit(SequenceState &) {}

void check_top_tokens(const TopTokens &top, int32_t vocab) {
    require(top.k <= kMaxTopTokens && top.ids && top.logp && top.n_candidates >= 0 && top.n_candidates <= vocab,
            SPECLA_ERR_INTERNAL, "bad top-token request (k ", top.k, ", ", top.n_candidates,
            " candidates of ", vocab, ")");
}

void check_fixed_width_draft(const FixedWidthDraft &d, int32_t vocab) {
    require(d.levels >= 1 && d.root_ids && d.root_logp && d.root_feature && d.counts && d.tokens && d.parents &&
                d.ids && d.logp && d.n_candidates >= 0 && d.n_candidates <= vocab && d.catch_up_rows >= 0 &&
                (d.catch_up_rows == 0 || (d.catch_up_tokens && d.catch_up_features)),
            SPECLA_ERR_INTERNAL, "draft_fixed_width: bad request (width ", d.width, ", ", d.levels, " levels, ",
            d.n_candidates, " candidates of ", vocab, ", ", d.catch_up_rows, " catch-up rows)");
}

void Backend::draft_fixed_width(SequenceState &, const FixedWidthDraft &) {
    fail(SPECLA_ERR_UNSUPPORTED, "fixed-width drafting in one call is not available on this backend");
}

void Backend::copy_state(SequenceState &, SequenceState &) {
    fail(SPECLA_ERR_UNSUPPORTED, "copying a session state is not available on this backend yet");
}

void Backend::export_state(SequenceState &, float *, float *) {
    fail(SPECLA_ERR_UNSUPPORTED, "saving a session state is not available on this backend yet");
}

void Backend::import_state(SequenceState &, const float *, const float *) {
    fail(SPECLA_ERR_UNSUPPORTED, "restoring a session state is not available on this backend yet");
}

std::unique_ptr<Backend> Backend::create_drafter_backend(const ModelConfig &, ModelWeights) const {
    fail(SPECLA_ERR_UNSUPPORTED, "drafter models are not available on this backend yet");
}

SessionMemory Backend::session_memory(const SequenceState &) const { return {}; }

}  // namespace specla
