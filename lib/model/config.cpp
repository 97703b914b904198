#include "model/config.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace specla {
namespace {

using json = nlohmann::json;

// Field accessors that name the field and the file in every error.
struct Fields {
    const json &j;
    const std::string &origin;

    bool present(const char *key) const { return j.contains(key) && !j.at(key).is_null(); }

    int64_t integer(const char *key) const {
        require(present(key), SPECLA_ERR_FORMAT, origin, ": required field '", key, "' is missing");
        const json &v = j.at(key);
        require(v.is_number_integer() || (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()),
                SPECLA_ERR_FORMAT, origin, ": field '", key, "' must be an integer");
        return v.is_number_integer() ? v.get<int64_t>() : int64_t(v.get<double>());
    }
    int64_t integer_or(const char *key, int64_t fallback) const {
        return present(key) ? integer(key) : fallback;
    }
    double number_or(const char *key, double fallback) const {
        if (!present(key)) return fallback;
        require(j.at(key).is_number(), SPECLA_ERR_FORMAT, origin, ": field '", key, "' must be a number");
        return j.at(key).get<double>();
    }
    bool boolean_or(const char *key, bool fallback) const {
        if (!present(key)) return fallback;
        require(j.at(key).is_boolean(), SPECLA_ERR_FORMAT, origin, ": field '", key, "' must be true or false");
        return j.at(key).get<bool>();
    }
    // bos/eos may be an integer or a list (first entry wins), or absent.
    int32_t token_id_or_none(const char *key) const {
        if (!present(key)) return -1;
        const json &v = j.at(key);
        if (v.is_array() && !v.empty() && v.at(0).is_number_integer()) return v.at(0).get<int32_t>();
        require(v.is_number_integer(), SPECLA_ERR_FORMAT, origin, ": field '", key, "' must be a token id");
        return v.get<int32_t>();
    }
};

void positive(int64_t value, const char *key, const std::string &origin) {
    require(value > 0 && value < (int64_t(1) << 31), SPECLA_ERR_FORMAT, origin, ": field '", key,
            "' must be a positive integer, got ", value);
}

}  // namespace

ModelConfig ModelConfig::from_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    require(bool(in), SPECLA_ERR_IO, "cannot open ", path);
    std::stringstream ss;
    ss << in.rdbuf();
    require(!in.bad(), SPECLA_ERR_IO, "cannot read ", path);
    return from_json_text(ss.str(), path);
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

    ModelConfig c;
    int64_t v;
    v = f.integer("vocab_size"), positive(v, "vocab_size", origin), c.vocab_size = int32_t(v);
    v = f.integer("hidden_size"), positive(v, "hidden_size", origin), c.hidden_size = int32_t(v);
    v = f.integer("num_hidden_layers"), positive(v, "num_hidden_layers", origin), c.num_layers = int32_t(v);
    v = f.integer("num_heads"), positive(v, "num_heads", origin), c.num_heads = int32_t(v);
    v = f.integer_or("num_v_heads", c.num_heads), positive(v, "num_v_heads", origin), c.num_v_heads = int32_t(v);
    require(c.num_v_heads % c.num_heads == 0, SPECLA_ERR_FORMAT, origin, ": field 'num_v_heads' (",
            c.num_v_heads, ") must be a multiple of 'num_heads' (", c.num_heads, ")");
    v = f.integer("head_dim"), positive(v, "head_dim", origin), c.head_k_dim = int32_t(v);

    const double expand_v = f.number_or("expand_v", 2.0);
    const double vdim = c.head_k_dim * expand_v;
    require(expand_v > 0 && std::floor(vdim) == vdim, SPECLA_ERR_FORMAT, origin, ": field 'expand_v' (",
            expand_v, ") times 'head_dim' (", c.head_k_dim, ") must be a positive integer");
    c.head_v_dim = int32_t(vdim);

    c.use_gate = f.boolean_or("use_gate", true);
    c.use_short_conv = f.boolean_or("use_short_conv", true);
    c.allow_neg_eigval = f.boolean_or("allow_neg_eigval", false);
    c.tie_word_embeddings = f.boolean_or("tie_word_embeddings", false);
    v = f.integer_or("conv_size", 4), positive(v, "conv_size", origin), c.conv_size = int32_t(v);
    require(c.conv_size <= 64, SPECLA_ERR_UNSUPPORTED, origin, ": field 'conv_size' = ", c.conv_size,
            " is larger than the supported maximum of 64");
    c.norm_eps = float(f.number_or("norm_eps", 1e-6));
    require(c.norm_eps >= 0, SPECLA_ERR_FORMAT, origin, ": field 'norm_eps' must not be negative");

    if (f.present("intermediate_size")) {
        v = f.integer("intermediate_size");
        positive(v, "intermediate_size", origin);
        c.intermediate_size = int32_t(v);
    } else {
        // fla: 256 * ceil(int(D * hidden_ratio * 2/3) / 256)
        const double ratio = f.number_or("hidden_ratio", 4.0);
        require(ratio > 0, SPECLA_ERR_FORMAT, origin, ": field 'hidden_ratio' must be positive");
        const int64_t base = int64_t(c.hidden_size * ratio * 2.0 / 3.0);
        c.intermediate_size = int32_t(256 * ((base + 255) / 256));
        positive(c.intermediate_size, "intermediate_size (from hidden_ratio)", origin);
    }
    c.bos_token_id = f.token_id_or_none("bos_token_id");
    c.eos_token_id = f.token_id_or_none("eos_token_id");
    if (c.bos_token_id >= c.vocab_size) c.bos_token_id = -1;
    if (c.eos_token_id >= c.vocab_size) c.eos_token_id = -1;
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
