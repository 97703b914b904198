#include "model/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <thread>

#include "model/checkpoint.h"
#include "model/safetensors.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace specla {

void Matrix::allocate(int64_t r, int64_t c, WeightType t) {
    rows = r, cols = c, type = t;
    if (t == WeightType::F32) f32.assign(size_t(r * c), 0.f), bf16.clear();
    else bf16.assign(size_t(r * c), 0), f32.clear();
}

void Matrix::row_to_f32(int64_t r, float *out) const {
    if (type == WeightType::F32) {
        std::memcpy(out, f32.data() + r * cols, size_t(cols) * 4);
    } else {
        const uint16_t *p = bf16.data() + r * cols;
        for (int64_t i = 0; i < cols; ++i) out[i] = bf16_to_f32(p[i]);
    }
}

InProjLayout::InProjLayout(const ModelConfig &c) {
    const int64_t KD = c.key_dim(), VD = c.value_dim();
    q = 0, k = KD, v = 2 * KD;
    g = v + VD;
    a = g + (c.use_gate ? VD : 0);
    b = a + c.num_v_heads;
    rows = b + c.num_v_heads;
}

namespace {

// Looks up tensors by name with the checks every required tensor gets.
class TensorSource {
public:
    explicit TensorSource(const Checkpoint &ck) : ck_(ck) {}

    const TensorView &get(const std::string &name, std::vector<int64_t> shape) const {
        const TensorView *v = ck_.find(name);
        require(v != nullptr, SPECLA_ERR_SHAPE, ck_.folder(), ": required tensor '", name, "' is missing");
        require(v->dtype == DType::F32 || v->dtype == DType::BF16 || v->dtype == DType::F16,
                SPECLA_ERR_UNSUPPORTED, v->file, ": tensor '", name, "' has dtype ", v->dtype_string,
                "; weights must be F32, BF16 or F16");
        TensorView want;
        want.shape = shape;
        require(v->shape == shape, SPECLA_ERR_SHAPE, v->file, ": tensor '", name, "' has shape ",
                v->shape_string(), ", expected ", want.shape_string());
        return *v;
    }

    HostVec<float> vector(const std::string &name, std::vector<int64_t> shape) const {
        const TensorView &v = get(name, shape);
        HostVec<float> out(size_t(v.numel()));
        convert_to_f32(v, out.data());
        return out;
    }

private:
    const Checkpoint &ck_;
};

// Stacks several [r_i, cols] tensors row-wise into one matrix whose type follows the sources:
// BF16 only if every source is BF16.
void stack_rows(Matrix &m, const std::vector<const TensorView *> &parts, int64_t cols) {
    int64_t rows = 0;
    bool all_bf16 = true;
    for (const TensorView *p : parts) rows += p->shape[0], all_bf16 &= p->dtype == DType::BF16;
    m.allocate(rows, cols, all_bf16 ? WeightType::BF16 : WeightType::F32);
    int64_t r = 0;
    for (const TensorView *p : parts) {
        if (all_bf16) convert_to_bf16(*p, m.bf16.data() + r * cols);
        else convert_to_f32(*p, m.f32.data() + r * cols);
        r += p->shape[0];
    }
}

}  // namespace

LayerWeights load_layer_weights(const Checkpoint &ck, int32_t layer) {
    const ModelConfig &c = ck.config();
    const TensorSource src(ck);
    const int64_t D = c.hidden_size, KD = c.key_dim(), VD = c.value_dim(), HV = c.num_v_heads,
                  I = c.intermediate_size, W = c.conv_size, V = c.head_v_dim;
    const std::string p = "model.layers." + std::to_string(layer) + ".";
    LayerWeights L;
    L.attn_norm = src.vector(p + "attn_norm.weight", {D});
    std::vector<const TensorView *> in = {&src.get(p + "attn.q_proj.weight", {KD, D}),
                                          &src.get(p + "attn.k_proj.weight", {KD, D}),
                                          &src.get(p + "attn.v_proj.weight", {VD, D})};
    if (c.use_gate) in.push_back(&src.get(p + "attn.g_proj.weight", {VD, D}));
    in.push_back(&src.get(p + "attn.a_proj.weight", {HV, D}));
    in.push_back(&src.get(p + "attn.b_proj.weight", {HV, D}));
    stack_rows(L.in_proj, in, D);
    if (c.use_short_conv) {
        L.conv.resize(size_t(c.conv_channels() * W));
        convert_to_f32(src.get(p + "attn.q_conv1d.weight", {KD, 1, W}), L.conv.data());
        convert_to_f32(src.get(p + "attn.k_conv1d.weight", {KD, 1, W}), L.conv.data() + KD * W);
        convert_to_f32(src.get(p + "attn.v_conv1d.weight", {VD, 1, W}), L.conv.data() + 2 * KD * W);
    }
    L.A_log = src.vector(p + "attn.A_log", {HV});
    L.dt_bias = src.vector(p + "attn.dt_bias", {HV});
    L.o_norm = src.vector(p + "attn.o_norm.weight", {V});
    stack_rows(L.o_proj, {&src.get(p + "attn.o_proj.weight", {D, VD})}, VD);
    L.mlp_norm = src.vector(p + "mlp_norm.weight", {D});
    stack_rows(L.gate_up, {&src.get(p + "mlp.gate_proj.weight", {I, D}), &src.get(p + "mlp.up_proj.weight", {I, D})}, D);
    stack_rows(L.down, {&src.get(p + "mlp.down_proj.weight", {D, I})}, I);
    return L;
}

Matrix load_matrix(const Checkpoint &ck, const std::string &name, int64_t rows, int64_t cols) {
    Matrix m;
    stack_rows(m, {&TensorSource(ck).get(name, {rows, cols})}, cols);
    return m;
}

ModelWeights load_weights(const Checkpoint &ck, const ProgressFn &progress) {
    const ModelConfig &c = ck.config();
    const TensorSource src(ck);
    const int64_t D = c.hidden_size, vocab = c.vocab_size;
    auto report = [&](float f) {
        if (progress && !progress(f)) fail(SPECLA_ERR_ABORTED, "model loading aborted by the progress callback");
    };
    report(0.f);

    ModelWeights w;
    w.embeddings = load_matrix(ck, "model.embeddings.weight", vocab, D);
    w.layers.resize(size_t(c.num_layers));
    for (int l = 0; l < c.num_layers; ++l) {
        w.layers[size_t(l)] = load_layer_weights(ck, l);
        report(float(l + 1) / float(c.num_layers + 1));
    }
    w.final_norm = src.vector("model.norm.weight", {D});
    if (!c.tie_word_embeddings) w.lm_head = load_matrix(ck, "lm_head.weight", vocab, D);
    report(1.f);
    return w;
}

namespace {

// SplitMix64: a tiny, good, seedable generator for reproducible random weights.
struct SplitMix {
    uint64_t s;
    uint64_t next() {
        uint64_t z = (s += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
    float symmetric(float scale) { return (2.f * uniform() - 1.f) * scale; }
};

void fill_matrix(Matrix &m, int64_t rows, int64_t cols, WeightType t, float scale, uint64_t seed, ThreadPool &pool) {
    m.allocate(rows, cols, t);
    const int64_t n = rows * cols;
    // Chunks with their own streams so large matrices fill in parallel yet deterministically.
    const int64_t chunk = 1 << 16;
    pool.parallel_for((n + chunk - 1) / chunk, [&](int64_t b, int64_t e) {
        for (int64_t ci = b; ci < e; ++ci) {
            const int64_t c0 = ci * chunk, c1 = std::min(n, c0 + chunk);
            SplitMix rng{seed * 0x100000001b3ull + uint64_t(c0)};
            for (int64_t i = c0; i < c1; ++i) {
                const float x = rng.symmetric(scale);
                if (t == WeightType::F32) m.f32[size_t(i)] = x;
                else m.bf16[size_t(i)] = f32_to_bf16(x);
            }
        }
    });
}

HostVec<float> fill_vector(int64_t n, float center, float spread, SplitMix &rng) {
    HostVec<float> v(static_cast<size_t>(n));
    for (auto &x : v) x = center + rng.symmetric(spread);
    return v;
}

}  // namespace

ModelWeights random_weights(const ModelConfig &c, uint64_t seed, WeightType t) {
    const int64_t D = c.hidden_size, VD = c.value_dim(), I = c.intermediate_size, W = c.conv_size;
    SplitMix rng{seed};
    uint64_t stream = seed;
    auto next_seed = [&] { return ++stream * 0x9e3779b97f4a7c15ull; };
    // Uniform(-a, a) has std a/sqrt(3); a = sqrt(3/fan_in) gives unit-variance outputs.
    auto scale = [](int64_t fan_in) { return std::sqrt(3.0f / float(fan_in)); };

    ThreadPool pool(int(std::max(1u, std::thread::hardware_concurrency())));
    ModelWeights w;
    fill_matrix(w.embeddings, c.vocab_size, D, t, 1.0f, next_seed(), pool);
    w.layers.resize(size_t(c.num_layers));
    for (auto &L : w.layers) {
        L.attn_norm = fill_vector(D, 1.f, 0.2f, rng);
        fill_matrix(L.in_proj, InProjLayout(c).rows, D, t, scale(D), next_seed(), pool);
        if (c.use_short_conv) L.conv = fill_vector(c.conv_channels() * W, 0.f, 0.6f, rng);
        L.A_log = fill_vector(c.num_v_heads, 0.f, 1.0f, rng);
        L.dt_bias = fill_vector(c.num_v_heads, -2.f, 1.0f, rng);
        L.o_norm = fill_vector(c.head_v_dim, 1.f, 0.2f, rng);
        fill_matrix(L.o_proj, D, VD, t, scale(VD) * 0.5f, next_seed(), pool);
        L.mlp_norm = fill_vector(D, 1.f, 0.2f, rng);
        fill_matrix(L.gate_up, 2 * I, D, t, scale(D), next_seed(), pool);
        fill_matrix(L.down, D, I, t, scale(I) * 0.5f, next_seed(), pool);
    }
    w.final_norm = fill_vector(D, 1.f, 0.2f, rng);
    if (!c.tie_word_embeddings) fill_matrix(w.lm_head, c.vocab_size, D, t, scale(D), next_seed(), pool);
    return w;
}

Matrix random_matrix(int64_t rows, int64_t cols, WeightType type, float scale, uint64_t seed) {
    ThreadPool pool(int(std::max(1u, std::thread::hardware_concurrency())));
    Matrix m;
    fill_matrix(m, rows, cols, type, scale, seed, pool);
    return m;
}

}  // namespace specla
