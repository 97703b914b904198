// The timeline of a kernel-per-op decoding step from the kernels' trace stamps
// (kernels/launch_common.cuh: per kernel, the first and the last CTA at entry, past the
// grid-dependency wait, input ready and exit): per kernel of a layer, microseconds from the layer's
// first kernel entry, averaged over the middle layers of several steps. bench_decode --trace prints
// the engine's, bench_step_floor the bare kernel chain's, in the same terms.
#pragma once

#include <cstddef>
#include <cstdio>
#include <vector>

#include "launch_common.cuh"

namespace bench {

class OpTimeline {
public:
    // A step has `layers` x `per_layer` stamped kernels, then one more (lm_head).
    OpTimeline(int layers, int per_layer) : layers_(layers), per_(per_layer), sum_(size_t(per_layer) * 2 * P, 0.0) {}

    // Words of the step's stamps, and what they hold before a step (min slots high, max slots 0).
    size_t words() const { return size_t(layers_ * per_ + 1) * S; }
    std::vector<unsigned long long> initial() const {
        std::vector<unsigned long long> v(words());
        for (size_t i = 0; i < v.size(); ++i) v[i] = i % 2 == 0 ? ~0ull : 0ull;
        return v;
    }

    // One step's stamps (words() of them), read back after the step; layers 4 .. layers-5 count.
    void add(const std::vector<unsigned long long> &t) {
        for (int l = 4; l < layers_ - 4; ++l) {
            const double t0 = double(t[size_t(per_ * l) * S]);
            for (int k = 0; k < per_; ++k)
                for (int j = 0; j < 2 * P; ++j) sum_[size_t(k * 2 * P + j)] += double(t[size_t(per_ * l + k) * S + j]) - t0;
            period_ += double(t[size_t(per_ * (l + 1)) * S]) - t0;
            ++count_;
        }
        const size_t last = size_t(per_ * layers_) * S;  // first entry to last exit (phase P - 1's max)
        last_ += double(t[last + size_t(2 * (P - 1) + 1)]) - double(t[last]);
        ++steps_;
    }

    // `names`: per_layer kernel names; `last`: the name of the step's last kernel.
    void print(const char *title, const char *const *names, const char *last) const {
        if (count_ == 0) return;
        std::printf("%s (us from the layer's first %s entry; first / last CTA;\n   mean over layers 4..%d of %d steps)\n",
                    title, names[0], layers_ - 5, steps_);
        std::printf("  %-10s %15s %15s %15s %15s\n", "kernel", "entry", "past wait", "input ready", "exit");
        for (int k = 0; k < per_; ++k) {
            std::printf("  %-10s", names[k]);
            for (int ph = 0; ph < P; ++ph)
                std::printf("   %5.2f / %5.2f", sum_[size_t(k * 2 * P + 2 * ph)] / count_ / 1e3,
                            sum_[size_t(k * 2 * P + 2 * ph + 1)] / count_ / 1e3);
            std::printf("\n");
        }
        std::printf("  layer period %.2f us; %s first entry to last exit %.2f us\n", period_ / count_ / 1e3, last,
                    last_ / steps_ / 1e3);
    }

private:
    static constexpr int S = specla::kern::kOpTraceSlots, P = specla::kern::kOpTracePhases;
    int layers_, per_;
    std::vector<double> sum_;
    double period_ = 0, last_ = 0;
    int count_ = 0, steps_ = 0;
};

}  // namespace bench
