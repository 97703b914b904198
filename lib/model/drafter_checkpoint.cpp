#include "model/drafter_checkpoint.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "model/checkpoint.h"
#include "util/error.h"
#include "util/file_read.h"

namespace specla {
namespace {

using json = nlohmann::json;

bool is_dir(const std::string &p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// Fields of the specla_drafter block, each error naming the field as `specla_drafter.<key>`.
struct Block {
    const json &j;
    const std::string &origin;

    const json &field(const char *key) const {
        require(j.contains(key) && !j.at(key).is_null(), SPECLA_ERR_FORMAT, origin, ": required field 'specla_drafter.",
                key, "' is missing");
        return j.at(key);
    }
    int32_t integer(const char *key) const {
        const json &v = field(key);
        require(v.is_number_integer() && v.get<int64_t>() >= INT32_MIN && v.get<int64_t>() <= INT32_MAX,
                SPECLA_ERR_FORMAT, origin, ": field 'specla_drafter.", key, "' must be an integer, got ", v.dump());
        return int32_t(v.get<int64_t>());
    }
    std::string string(const char *key) const {
        const json &v = field(key);
        require(v.is_string(), SPECLA_ERR_FORMAT, origin, ": field 'specla_drafter.", key, "' must be a string, got ",
                v.dump());
        return v.get<std::string>();
    }
};

DrafterInfo parse_block(const std::string &text, const std::string &origin) {
    const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
    require(!j.is_discarded() && j.is_object(), SPECLA_ERR_FORMAT, origin, " is not a JSON object");
    require(j.contains("specla_drafter"), SPECLA_ERR_FORMAT, origin,
            ": no 'specla_drafter' block, so this is not a drafter folder (a target model's config?)");
    const json &b = j.at("specla_drafter");
    require(b.is_object(), SPECLA_ERR_FORMAT, origin, ": 'specla_drafter' must be an object");
    const Block f{b, origin};
    DrafterInfo info;
    info.kind = f.string("kind");
    require(info.kind == "eagle", SPECLA_ERR_UNSUPPORTED, origin, ": 'specla_drafter.kind' = \"", info.kind,
            "\" is not supported (this engine runs \"eagle\")");
    info.format_version = f.integer("format_version");
    require(info.format_version == 1, SPECLA_ERR_UNSUPPORTED, origin, ": 'specla_drafter.format_version' = ",
            info.format_version, " is not supported (this engine reads version 1)");
    info.feature_layer = f.integer("feature_layer");
    require(info.feature_layer == -1, SPECLA_ERR_UNSUPPORTED, origin, ": 'specla_drafter.feature_layer' = ",
            info.feature_layer, " is not supported (only -1, the target's last hidden state)");
    info.target_hidden_size = f.integer("target_hidden_size");
    info.target_vocab_size = f.integer("target_vocab_size");
    info.target_num_hidden_layers = f.integer("target_num_hidden_layers");
    return info;
}

template <typename T>
void require_match(const std::string &origin, const char *field, T drafter, const char *target_field, T target) {
    require(drafter == target, SPECLA_ERR_SHAPE, origin, ": '", field, "' = ", drafter, " but the target model's ",
            target_field, " is ", target, ": this drafter was made for another model");
}

}  // namespace

DrafterCheckpoint load_drafter_checkpoint(const std::string &folder, const ModelConfig &target) {
    require(!folder.empty(), SPECLA_ERR_INVALID_ARGUMENT, "drafter folder path is empty");
    require(is_dir(folder), SPECLA_ERR_IO, "drafter folder '", folder, "' does not exist or is not a folder");
    const std::string config_path = folder + "/config.json";
    require(path_exists(config_path), SPECLA_ERR_IO, "drafter folder '", folder, "' has no config.json");
    const std::string text = read_json_file(config_path);

    DrafterCheckpoint d;
    // The block first: a target model's folder passed by mistake is named as such.
    d.info = parse_block(text, config_path);
    d.config = ModelConfig::from_json_text(text, config_path);
    require_match(config_path, "specla_drafter.target_hidden_size", d.info.target_hidden_size, "hidden_size",
                  target.hidden_size);
    require_match(config_path, "specla_drafter.target_vocab_size", d.info.target_vocab_size, "vocab_size",
                  target.vocab_size);
    require_match(config_path, "specla_drafter.target_num_hidden_layers", d.info.target_num_hidden_layers,
                  "num_hidden_layers", target.num_layers);
    require_match(config_path, "hidden_size", d.config.hidden_size, "hidden_size", target.hidden_size);
    require_match(config_path, "vocab_size", d.config.vocab_size, "vocab_size", target.vocab_size);
    require(d.config.num_layers == 1, SPECLA_ERR_UNSUPPORTED, config_path, ": 'num_hidden_layers' = ",
            d.config.num_layers, " is not supported (an EAGLE drafter has one layer)");
    // One eps for the drafter's layer norms and the target's final norm, which its outputs go through.
    require(d.config.norm_eps == target.norm_eps, SPECLA_ERR_UNSUPPORTED, config_path, ": 'norm_eps' = ",
            d.config.norm_eps, " differs from the target's ", target.norm_eps,
            " (the drafter's outputs go through the target's final norm)");
    d.config.tie_word_embeddings = target.tie_word_embeddings;  // the head is the target's

    auto ck = Checkpoint::open(folder);
    const int64_t D = d.config.hidden_size;
    d.own.fc = load_matrix(*ck, "fc.weight", D, 2 * D);
    d.own.layers.push_back(load_layer_weights(*ck, 0));
    return d;
}

}  // namespace specla
