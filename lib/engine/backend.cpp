#include "engine/backend.h"

#include <vector>

#include "generate/sampler.h"
#include "memory/host_alloc.h"
#include "util/error.h"

namespace specla {

int32_t Backend::decode_and_sample(SequenceState &state, int32_t token, const SamplingConfig &sampling,
                                   double u, float *logits) {
    const int32_t vocab = config().vocab_size;
    HostVec<float> scratch;
    float *row = logits;
    if (!row) {
        scratch.resize(size_t(vocab));
        row = scratch.data();
    }
    eval_chain(state, &token, 1, LogitsRows::Last, row);
    return sample_token(row, vocab, sampling, u);
}

void Backend::verify_tree(SequenceState &, const int32_t *, const int32_t *, int32_t, TreeAlgorithm,
                          const VerifyOutputs &) {
    fail(SPECLA_ERR_UNSUPPORTED, "speculative verification is not available on this backend yet");
}

void Backend::commit_path(SequenceState &, const int32_t *, int32_t, bool) {
    fail(SPECLA_ERR_UNSUPPORTED, "speculative commit is not available on this backend yet");
}

void Backend::flush_commit(SequenceState &) {}

void Backend::copy_state(SequenceState &, SequenceState &) {
    fail(SPECLA_ERR_UNSUPPORTED, "copying a session state is not available on this backend yet");
}

SessionMemory Backend::session_memory(const SequenceState &) const { return {}; }

}  // namespace specla
