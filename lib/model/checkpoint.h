// A checkpoint folder: config.json plus model.safetensors, or shards listed in
// model.safetensors.index.json. Tensors stay memory-mapped until the weights are built.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/config.h"
#include "model/safetensors.h"

namespace specla {

class Checkpoint {
public:
    // Throws specla::Error (SPECLA_ERR_IO for a missing folder or file, SPECLA_ERR_FORMAT for a
    // malformed index or shard).
    static std::unique_ptr<Checkpoint> open(const std::string &folder);

    const ModelConfig &config() const { return config_; }
    const std::string &folder() const { return folder_; }
    const TensorView *find(const std::string &name) const;
    size_t tensor_count() const { return index_.size(); }

private:
    std::string folder_;
    ModelConfig config_;
    std::vector<std::unique_ptr<SafetensorsFile>> files_;
    std::map<std::string, const TensorView *> index_;
};

}  // namespace specla
