#include "cuda_probe.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace specla {
namespace cuda {

float CudaBackendProbe::time_decode_steps(CudaBackend &b, SequenceState &state, int32_t token, int32_t steps) {
    CudaSequenceState &st = b.cast(state);
    DeviceGuard g(b.device_);
    st.h_tokens[0] = token;
    // The graph exists before timing: the first step runs eagerly, the second captures it.
    b.run_decode(st);
    b.run_decode(st);
    check(cudaStreamSynchronize(st.stream), "warm-up steps");
    return stream_elapsed_ms(st.stream, [&] {
        for (int32_t i = 0; i < steps; ++i) b.run_decode(st);
    });
}

float CudaBackendProbe::time_recurrence_commit(CudaBackend &b, SequenceState &state, const int32_t *path, int32_t n_path,
                                               bool deferred, TreeAlgorithm algorithm, int32_t reps) {
    CudaSequenceState &st = b.cast(state);
    require(!st.verified_parents.empty(), SPECLA_ERR_STATE, "time_recurrence_commit needs a verified tree");
    DeviceGuard g(b.device_);
    const int32_t n = int32_t(st.verified_parents.size());
    b.flush_commit(st);
    TreeLaunch tl;
    b.prepare_tree(st, st.verified_parents.data(), n, algorithm, tl);
    check(cudaMemcpyAsync(st.tree_tables, st.h_tree_tables, st.tree_tables_count * 4, cudaMemcpyHostToDevice, st.stream), "tables");
    check(cudaEventSynchronize(st.desc_event), "cudaEventSynchronize");
    st.h_desc[0] = n_path;
    st.h_desc[1] = st.last_set;
    if (n_path > 0) std::memcpy(st.h_desc + 2, path, size_t(n_path) * 4);
    const int set = 1 - st.last_set;
    std::vector<float> times;
    const ModelConfig &c = b.config_;
    for (int32_t r = 0; r <= reps; ++r) {
        // The path becomes pending (descriptor upload, outside the timed region).
        check(cudaMemcpyAsync(st.desc, st.h_desc, size_t(n_path + 2) * 4, cudaMemcpyHostToDevice, st.stream), "path");
        st.commit.verified(n);
        st.commit.begin_commit(path, n_path);
        const float ms = stream_elapsed_ms(st.stream, [&] {
            // Several chains from the committed state cannot take the fused commit (see verify_tree).
            if (!deferred || (!tl.wy && tl.root_chains > 1)) b.flush_commit(st);
            for (int l = 0; l < c.num_layers; ++l) b.enqueue_tree_layer(st, l, tl, set, b.launch_ctx(st.stream));
        });
        check(cudaMemsetAsync(st.desc, 0, 4, st.stream), "clear pending");
        st.commit.pending_applied();
        if (r) times.push_back(ms);  // the first is a warm-up
    }
    st.commit.state_moved();
    std::sort(times.begin(), times.end());
    return times.empty() ? 0.f : times[times.size() / 2];
}

}  // namespace cuda
}  // namespace specla
