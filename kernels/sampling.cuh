// Token selection on the device, following sampling/sampler.h exactly (the host reference):
//   greedy: the largest logit, lowest id on ties;
//   otherwise softmax(logits / T) restricted to the top_k largest (ties: lower id first), then to
//   the smallest prefix of the descending order whose mass reaches top_p, renormalised (each
//   probability rounded to float, as the host stores them); the token is the first in id order
//   whose cumulative mass exceeds u * total. Weights and sums are in double, as on the host.
// Implementation: CUB radix sort (descending, stable: ties keep id order), CUB inclusive scans for
// the top-p cut and the draw; block reductions for argmax.
#pragma once

#include <stddef.h>

#include "launch_common.cuh"

namespace specla {
namespace kern {

struct SamplingBuffers {
    float *keys_in = nullptr, *keys_out = nullptr;  // [vocab]
    int32_t *ids_in = nullptr, *ids_out = nullptr;  // [vocab]
    double *w = nullptr, *cum = nullptr, *pd = nullptr;  // [vocab]
    int32_t *scalars = nullptr;  // [4]: cut, last kept id, ...
    void *temp = nullptr;        // CUB temporary storage
    size_t temp_bytes = 0;
};

// Bytes of CUB temporary storage sampling needs for a vocabulary (query once, allocate once).
size_t sampling_temp_bytes(int32_t vocab);

// Writes the chosen token id to *out_token (device memory). Not for greedy configs (use argmax).
// The two halves below, one after the other.
cudaError_t launch_sample(const float *logits, int32_t vocab, float temperature, int32_t top_k, float top_p,
                          double u, const SamplingBuffers &buf, int32_t *out_token, cudaStream_t stream);

// The distribution alone: buf.pd[t] = the probability of id t (doubles holding the float-rounded
// probabilities, as the host's sampling_distribution stores them), buf.scalars[1] its last kept id.
cudaError_t launch_sampling_distribution(const float *logits, int32_t vocab, float temperature, int32_t top_k,
                                         float top_p, const SamplingBuffers &buf, cudaStream_t stream);
// The draw from buf.pd as it is (entries zeroed by launch_remove_tokens included): the first id in
// id order whose cumulative mass exceeds u * the total (sample_from_distribution's rule).
cudaError_t launch_sample_from_distribution(int32_t vocab, double u, const SamplingBuffers &buf, int32_t *out_token,
                                            cudaStream_t stream);

// A few token ids passed by value (a draft position's children).
constexpr int32_t kTokenListMax = 64;
struct TokenList {
    int32_t n = 0;
    int32_t id[kTokenListMax];
};
// out[0] = the total of buf.pd, out[1 + i] = buf.pd[ids.id[i]]; `out` may be pinned host memory.
cudaError_t launch_gather_probs(const SamplingBuffers &buf, int32_t vocab, const TokenList &ids, double *out,
                                cudaStream_t stream);
// buf.pd[ids.id[i]] = 0: the residual after rejected one-hot proposals, before a draw.
cudaError_t launch_remove_tokens(const SamplingBuffers &buf, const TokenList &ids, cudaStream_t stream);

// *out_token = argmax(logits[0..n)), lowest id on ties. `slot` is a scratch u64.
cudaError_t launch_argmax(const float *logits, int32_t n, unsigned long long *slot, int32_t *out_token,
                          cudaStream_t stream);

// Id encoded in an argmax key (see device_common.cuh).
inline int32_t argmax_key_id(unsigned long long key) { return int32_t(~uint32_t(key & 0xffffffffull)); }

}  // namespace kern
}  // namespace specla
