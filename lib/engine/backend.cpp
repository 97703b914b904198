#include "engine/backend.h"

#include <vector>

#include "generate/sampler.h"
#include "memory/host_alloc.h"

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

}  // namespace specla
