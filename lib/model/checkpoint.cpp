#include "model/checkpoint.h"

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include <set>

#include "util/error.h"
#include "util/file_read.h"

namespace specla {
namespace {

bool is_dir(const std::string &p) {
    struct stat st {};
    return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

}  // namespace

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string &folder) {
    require(!folder.empty(), SPECLA_ERR_INVALID_ARGUMENT, "model folder path is empty");
    require(is_dir(folder), SPECLA_ERR_IO, "model folder '", folder, "' does not exist or is not a folder");
    std::unique_ptr<Checkpoint> ck(new Checkpoint());
    ck->folder_ = folder;
    const std::string config_path = folder + "/config.json";
    require(path_exists(config_path), SPECLA_ERR_IO, "model folder '", folder, "' has no config.json");
    ck->config_ = ModelConfig::from_file(config_path);

    const std::string single = folder + "/model.safetensors";
    const std::string index_path = folder + "/model.safetensors.index.json";
    std::vector<std::string> shards;
    // Whatever is there is used (and refused if it is not a regular file), so that a named pipe
    // or a folder in its place is reported as such rather than as missing.
    if (path_exists(single)) {
        shards.push_back("model.safetensors");
    } else if (path_exists(index_path)) {
        nlohmann::json j = nlohmann::json::parse(read_json_file(index_path), nullptr, false);
        require(!j.is_discarded() && j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
                SPECLA_ERR_FORMAT, index_path, " is not a valid index (needs a 'weight_map' object)");
        std::set<std::string> names;
        for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
            require(it.value().is_string(), SPECLA_ERR_FORMAT, index_path, ": weight_map entry '", it.key(),
                    "' must name a file");
            const std::string f = it.value().get<std::string>();
            require(f.find('/') == std::string::npos && f.find("..") == std::string::npos, SPECLA_ERR_FORMAT,
                    index_path, ": shard name '", f, "' must be a file in the model folder");
            names.insert(f);
        }
        shards.assign(names.begin(), names.end());
        require(!shards.empty(), SPECLA_ERR_FORMAT, index_path, " lists no shards");
    } else {
        fail(SPECLA_ERR_IO, "model folder '", folder,
             "' has neither model.safetensors nor model.safetensors.index.json");
    }
    for (const std::string &s : shards) {
        ck->files_.push_back(SafetensorsFile::open(folder + "/" + s));
        for (const auto &kv : ck->files_.back()->tensors()) {
            require(ck->index_.emplace(kv.first, &kv.second).second, SPECLA_ERR_FORMAT, "tensor '", kv.first,
                    "' appears in more than one shard of ", folder);
        }
    }
    return ck;
}

const TensorView *Checkpoint::find(const std::string &name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : it->second;
}

}  // namespace specla
