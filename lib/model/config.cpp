#include "model/config.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

#include "util/error.h"
#include "util/file_read.h"

namespace specla {
namespace {

using json = nlohmann::json;

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
// Integer values are saturated here before any range check, so that no conversion of a hostile
// value (1e300, 2^64 - 1) is undefined; messages print the JSON text, not the saturated value.
constexpr int64_t kSaturate = int64_t(1) << 53;

// Field accessors that name the field and the file in every error.
struct Fields {
    const json &j;
    const std::string &origin;

    bool present(const char *key) const { return j.contains(key) && !j.at(key).is_null(); }
    const json &required(const char *key) const {
        require(present(key), SPECLA_ERR_FORMAT, origin, ": required field '", key, "' is missing");
        return j.at(key);
    }

    // An integral JSON number (12 or 12.0), saturated to +-2^53.
    int64_t integer_value(const json &v, const std::string &what) const {
        if (v.is_number_unsigned()) return int64_t(std::min<uint64_t>(v.get<uint64_t>(), uint64_t(kSaturate)));
        if (v.is_number_integer()) return std::max(v.get<int64_t>(), -kSaturate);
        const double d = v.is_number_float() ? v.get<double>() : 0.5;
        require(std::isfinite(d) && std::floor(d) == d, SPECLA_ERR_FORMAT, origin, ": field '", what,
                "' must be an integer, got ", v.dump());
        return int64_t(std::clamp(d, -double(kSaturate), double(kSaturate)));
    }

    // A size: an integer in [1, 2^31); one above `limit` could describe a model, but not one this
    // engine runs.
    int32_t dimension(const json &v, const char *key, int64_t limit, const char *limit_name) const {
        const int64_t n = integer_value(v, key);
        require(n > 0 && n <= kInt32Max, SPECLA_ERR_FORMAT, origin, ": field '", key,
                "' must be a positive integer, got ", v.dump());
        require(n <= limit, SPECLA_ERR_UNSUPPORTED, origin, ": field '", key, "' = ", n, " exceeds ", limit_name,
                " (", limit, ")");
        return int32_t(n);
    }
    int32_t dimension(const char *key, int64_t limit, const char *limit_name) const {
        return dimension(required(key), key, limit, limit_name);
    }
    int32_t dimension_or(const char *key, int32_t fallback, int64_t limit, const char *limit_name) const {
        return present(key) ? dimension(j.at(key), key, limit, limit_name) : fallback;
    }

    // A finite number. (The parser already refuses literals that overflow a double, like 1e999;
    // checked here too so that no later conversion depends on that.)
    double number_or(const char *key, double fallback) const {
        if (!present(key)) return fallback;
        const json &v = j.at(key);
        require(v.is_number() && std::isfinite(v.get<double>()), SPECLA_ERR_FORMAT, origin, ": field '", key,
                "' must be a finite number, got ", v.dump());
        return v.get<double>();
    }
    bool boolean_or(const char *key, bool fallback) const {
        if (!present(key)) return fallback;
        require(j.at(key).is_boolean(), SPECLA_ERR_FORMAT, origin, ": field '", key, "' must be true or false");
        return j.at(key).get<bool>();
    }

    // bos/eos: absent or null (none), a token id, or a list of ids (generation settings list several
    // stop ids; this engine stops on one, the first). Every id must be in [0, vocab).
    int32_t token_id_or_none(const char *key, int32_t vocab) const {
        if (!present(key)) return -1;
        const json &v = j.at(key);
        if (!v.is_array()) return token_id(v, key, vocab);
        int32_t first = -1;
        for (size_t i = 0; i < v.size(); ++i) {
            const int32_t id = token_id(v[i], std::string(key) + "[" + std::to_string(i) + "]", vocab);
            if (i == 0) first = id;
        }
        return first;
    }
    int32_t token_id(const json &v, const std::string &what, int32_t vocab) const {
        require(v.is_number(), SPECLA_ERR_FORMAT, origin, ": field '", what, "' must be a token id, got ", v.dump());
        const int64_t id = integer_value(v, what);
        require(id >= 0 && id < vocab, SPECLA_ERR_FORMAT, origin, ": field '", what, "' = ", v.dump(),
                " is not a token id in [0, vocab_size = ", vocab, ")");
        return int32_t(id);
    }

    // A size derived from several fields (computed in 64 bits from values already within their
    // limits, so it cannot overflow), named by the fields it comes from.
    void derived_within(int64_t value, const char *what, int64_t limit, const char *limit_name) const {
        require(value <= limit, SPECLA_ERR_UNSUPPORTED, origin, ": ", what, " = ", value, " exceeds ", limit_name,
                " (", limit, ")");
    }
};

// Every size the engine derives from the configuration, checked in 64 bits against the limits
// so that the 32-bit accessors of ModelConfig and the buffers sized from them are exact.
void check_derived_sizes(const ModelConfig &c, const Fields &f) {
    const int64_t D = c.hidden_size, H = c.num_heads, HV = c.num_v_heads, K = c.head_k_dim, V = c.head_v_dim,
                  I = c.intermediate_size, L = c.num_layers, W = c.conv_size;
    const int64_t dim = SPECLA_LIMIT_MODEL_DIM;
    const int64_t KD = H * K, VD = HV * V;  // each factor < 2^31: no overflow
    f.derived_within(KD, "key width num_heads x head_dim", dim, "SPECLA_LIMIT_MODEL_DIM");
    f.derived_within(VD, "value width num_v_heads x head_dim x expand_v", dim, "SPECLA_LIMIT_MODEL_DIM");
    const int64_t CC = 2 * KD + VD;
    f.derived_within(CC, "conv channels (2 x key width + value width)", dim, "SPECLA_LIMIT_MODEL_DIM");
    const int64_t R = 2 * KD + (c.use_gate ? 2 : 1) * VD + 2 * HV;
    f.derived_within(R, "fused input projection rows", dim, "SPECLA_LIMIT_MODEL_DIM");
    f.derived_within(2 * I, "fused gate/up projection rows (2 x intermediate_size)", dim, "SPECLA_LIMIT_MODEL_DIM");

    // From here every width is at most 2^18 and L at most 2^12: the products stay far below 2^63.
    const int64_t state_floats = L * (HV * K * V + (c.use_short_conv ? (W - 1) * CC : 0));
    f.derived_within(state_floats * 4, "recurrent state and conv cache per sequence (bytes)",
                     int64_t(SPECLA_LIMIT_SESSION_STATE_BYTES), "SPECLA_LIMIT_SESSION_STATE_BYTES");
    const int64_t token_floats = 2 * D + R + CC + 2 * VD + 2 * I + 2 * HV + L * (KD + VD + HV + CC);
    f.derived_within(token_floats * 4, "working memory per token (bytes)", int64_t(SPECLA_LIMIT_SESSION_TOKEN_BYTES),
                     "SPECLA_LIMIT_SESSION_TOKEN_BYTES");
}

}  // namespace

ModelConfig ModelConfig::from_file(const std::string &path) {
    return from_json_text(read_json_file(path), path);
}

ModelConfig ModelConfig::from_json_text(const std::string &text, const std::string &origin) {
    json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    require(!j.is_discarded(), SPECLA_ERR_FORMAT, origin, " is not valid JSON");
    require(j.is_object(), SPECLA_ERR_FORMAT, origin, " must hold a JSON object");
    Fields f{j, origin};

    // Model family. Anything but a pure Gated DeltaNet is a different model.
    require(f.present("model_type") && j.at("model_type").is_string(), SPECLA_ERR_FORMAT, origin,
            ": required field 'model_type' is missing");
    const std::string type = j.at("model_type").get<std::string>();
    require(type == "gated_deltanet", SPECLA_ERR_UNSUPPORTED, origin, ": model_type '", type,
            "' is not supported (this engine runs 'gated_deltanet')");
    require(!f.present("attn"), SPECLA_ERR_UNSUPPORTED, origin,
            ": field 'attn' configures hybrid softmax-attention layers, which this engine does not run");
    require(!f.present("attnres_block_size"), SPECLA_ERR_UNSUPPORTED, origin,
            ": field 'attnres_block_size' (attention residual blocks) is not supported");
    require(!f.boolean_or("use_l2warp", false), SPECLA_ERR_UNSUPPORTED, origin,
            ": field 'use_l2warp' = true is not supported");
    if (f.present("hidden_act")) {
        const json &act = j.at("hidden_act");
        require(act.is_string() && (act == "swish" || act == "silu"), SPECLA_ERR_UNSUPPORTED, origin,
                ": field 'hidden_act' must be \"swish\" (SiLU), got ", act.dump());
    }

    constexpr int64_t kDim = SPECLA_LIMIT_MODEL_DIM;
    ModelConfig c;
    c.vocab_size = f.dimension("vocab_size", SPECLA_LIMIT_MODEL_VOCAB, "SPECLA_LIMIT_MODEL_VOCAB");
    c.hidden_size = f.dimension("hidden_size", kDim, "SPECLA_LIMIT_MODEL_DIM");
    c.num_layers = f.dimension("num_hidden_layers", SPECLA_LIMIT_MODEL_LAYERS, "SPECLA_LIMIT_MODEL_LAYERS");
    c.num_heads = f.dimension("num_heads", kDim, "SPECLA_LIMIT_MODEL_DIM");
    c.num_v_heads = f.dimension_or("num_v_heads", c.num_heads, kDim, "SPECLA_LIMIT_MODEL_DIM");
    require(c.num_v_heads % c.num_heads == 0, SPECLA_ERR_FORMAT, origin, ": field 'num_v_heads' (",
            c.num_v_heads, ") must be a multiple of 'num_heads' (", c.num_heads, ")");
    c.head_k_dim = f.dimension("head_dim", kDim, "SPECLA_LIMIT_MODEL_DIM");

    // The value head size is a product with a float: checked as a double before it is converted.
    const double expand_v = f.number_or("expand_v", 2.0);
    const double vdim = c.head_k_dim * expand_v;
    require(expand_v > 0 && std::floor(vdim) == vdim, SPECLA_ERR_FORMAT, origin, ": field 'expand_v' (",
            expand_v, ") times 'head_dim' (", c.head_k_dim, ") must be a positive integer");
    require(vdim <= double(kDim), SPECLA_ERR_UNSUPPORTED, origin, ": value head size 'head_dim' x 'expand_v' = ",
            vdim, " exceeds SPECLA_LIMIT_MODEL_DIM (", kDim, ")");
    c.head_v_dim = int32_t(vdim);

    c.use_gate = f.boolean_or("use_gate", true);
    c.use_short_conv = f.boolean_or("use_short_conv", true);
    c.allow_neg_eigval = f.boolean_or("allow_neg_eigval", false);
    c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
    c.conv_size = f.dimension_or("conv_size", 4, SPECLA_LIMIT_MODEL_CONV_SIZE, "SPECLA_LIMIT_MODEL_CONV_SIZE");

    // Stored as a float: a value that is not a positive normal float would divide by zero or
    // turn every norm into NaN.
    const double eps = f.number_or("norm_eps", 1e-6);
    require(eps > 0 && eps <= 1 && float(eps) >= std::numeric_limits<float>::min(), SPECLA_ERR_FORMAT, origin,
            ": field 'norm_eps' must be in (0, 1] and representable as a float, got ", eps);
    c.norm_eps = float(eps);

    if (f.present("intermediate_size")) {
        c.intermediate_size = f.dimension("intermediate_size", kDim, "SPECLA_LIMIT_MODEL_DIM");
    } else {
        // fla: 256 * ceil(int(D * hidden_ratio * 2/3) / 256), computed as a double and range
        // checked before any conversion.
        const double ratio = f.number_or("hidden_ratio", 4.0);
        require(ratio > 0, SPECLA_ERR_FORMAT, origin, ": field 'hidden_ratio' must be positive, got ", ratio);
        const double base = std::floor(c.hidden_size * ratio * 2.0 / 3.0);
        require(base <= double(kDim), SPECLA_ERR_UNSUPPORTED, origin,
                ": intermediate_size from 'hidden_ratio' (", ratio, ") x 'hidden_size' (", c.hidden_size,
                ") exceeds SPECLA_LIMIT_MODEL_DIM (", kDim, ")");
        const int64_t rounded = 256 * ((int64_t(base) + 255) / 256);
        require(rounded > 0, SPECLA_ERR_FORMAT, origin, ": field 'hidden_ratio' (", ratio,
                ") gives an empty intermediate_size");
        c.intermediate_size = int32_t(rounded);
    }
    check_derived_sizes(c, f);

    c.bos_token_id = f.token_id_or_none("bos_token_id", c.vocab_size);
    c.eos_token_id = f.token_id_or_none("eos_token_id", c.vocab_size);
    return c;
}

int64_t ModelConfig::num_parameters() const {
    const int64_t D = hidden_size, I = intermediate_size, KD = key_dim(), VD = value_dim();
    int64_t attn = 2 * KD * D + VD * D + 2 * int64_t(num_v_heads) * D + 2 * num_v_heads + VD * D /*o*/ +
                   head_v_dim;
    if (use_gate) attn += VD * D;
    if (use_short_conv) attn += int64_t(conv_size) * (2 * KD + VD);
    const int64_t mlp = 3 * D * I;
    const int64_t layer = attn + mlp + 2 * D;
    int64_t total = layer * num_layers + int64_t(vocab_size) * D + D;
    if (!tie_word_embeddings) total += int64_t(vocab_size) * D;
    return total;
}

}  // namespace specla
