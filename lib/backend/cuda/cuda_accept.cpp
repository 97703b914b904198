// The CUDA backend's RowSampler (engine/backend.h): sampled acceptance of one-hot proposals
// (spec/accept.h, accept_sampled_rows) over a verification's rows where they are, instead of
// copying n + 1 vocab-wide rows of logits to the host. At each position the walk reaches, the
// row's sampling distribution is computed on the device by the plain device sampler's kernels
// (kernels/sampling.cu: dense in id order, the float probabilities the host's
// sampling_distribution gives), and only its total and the probabilities of the position's
// children come back (8 bytes each, one round trip per 64 children); the bonus is drawn there from
// what the rejected children leave.
#include <algorithm>

#include "backend/cuda/cuda_backend.h"
#include "util/error.h"

namespace specla {
namespace cuda {

namespace {

class CudaRowSampler final : public RowSampler {
public:
    CudaRowSampler(CudaSequenceState &st, const SamplingConfig &sampling, int32_t vocab, int32_t device)
        : st_(st), sampling_(sampling), vocab_(vocab), device_(device) {}

    void select(int32_t row) override {
        const int32_t rows = int32_t(st_.verified_parents.size());
        require(row >= 0 && row < rows, SPECLA_ERR_INTERNAL, "row sampler: row ", row, " outside the last verification's ",
                rows);
        DeviceGuard g(device_);
        check(kern::launch_sampling_distribution(st_.logits + size_t(row) * size_t(vocab_), vocab_, sampling_.temperature,
                                                 sampling_.top_k, sampling_.top_p, st_.sampling, st_.stream),
              "sampling distribution (acceptance)");
    }

    void probabilities(const int32_t *ids, int32_t n, double &total, double *probs) override {
        DeviceGuard g(device_);
        total = 1.0;
        for (int32_t off = 0; off == 0 || off < n; off += kern::kTokenListMax) {
            const kern::TokenList list = token_list(ids + off, std::min(n - off, kern::kTokenListMax));
            check(kern::launch_gather_probs(st_.sampling, vocab_, list, st_.d_gather, st_.stream), "gather probabilities");
            check(cudaMemcpyAsync(st_.h_gather, st_.d_gather, size_t(1 + list.n) * sizeof(double),
                                  cudaMemcpyDeviceToHost, st_.stream),
                  "copy probabilities");
            check(cudaStreamSynchronize(st_.stream), "row sampler");
            total = st_.h_gather[0];
            std::copy(st_.h_gather + 1, st_.h_gather + 1 + list.n, probs + off);
        }
    }

    int32_t draw(const int32_t *removed, int32_t n_removed, double u) override {
        DeviceGuard g(device_);
        for (int32_t off = 0; off < n_removed; off += kern::kTokenListMax)
            check(kern::launch_remove_tokens(st_.sampling, token_list(removed + off, std::min(n_removed - off, kern::kTokenListMax)),
                                             st_.stream),
                  "remove tokens");
        check(kern::launch_sample_from_distribution(vocab_, u, st_.sampling, st_.d_sampled, st_.stream), "draw");
        check(cudaMemcpyAsync(st_.h_sampled, st_.d_sampled, 4, cudaMemcpyDeviceToHost, st_.stream), "copy token");
        check(cudaStreamSynchronize(st_.stream), "row sampler");
        return *st_.h_sampled;
    }

private:
    static kern::TokenList token_list(const int32_t *ids, int32_t n) {
        kern::TokenList l;
        l.n = std::max(n, 0);
        std::copy(ids, ids + l.n, l.id);
        return l;
    }

    CudaSequenceState &st_;
    const SamplingConfig sampling_;
    const int32_t vocab_, device_;
};

}  // namespace

std::unique_ptr<RowSampler> CudaBackend::row_sampler(SequenceState &state, const SamplingConfig &sampling) {
    if (sampling.greedy() || sampling.needs_host_sampler(config_.vocab_size)) return nullptr;
    return std::make_unique<CudaRowSampler>(cast(state), sampling, config_.vocab_size, device_);
}

}  // namespace cuda
}  // namespace specla
