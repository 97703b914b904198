// Memory-mapped reader of the safetensors format: an 8-byte little-endian header length, a JSON
// header naming each tensor's dtype, shape and byte range, then the raw data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace specla {

enum class DType { F32, BF16, F16, I32, I64, Other };

const char *dtype_name(DType t);
size_t dtype_size(DType t);  // 0 for Other

struct TensorView {
    std::string name;
    std::string dtype_string;   // as written in the header ("F32", "BF16", "F8_E4M3", ...)
    DType dtype = DType::Other;
    std::vector<int64_t> shape;
    const uint8_t *data = nullptr;  // inside the mapping; valid while the file is open
    size_t bytes = 0;
    std::string file;           // for error messages

    int64_t numel() const;
    std::string shape_string() const;  // "[384, 128]"
};

class SafetensorsFile {
public:
    // Maps and validates the whole header (offsets inside the file, sizes matching dtype x shape,
    // no overlaps). Throws specla::Error: SPECLA_ERR_IO if it cannot be opened, SPECLA_ERR_FORMAT
    // for anything malformed.
    static std::unique_ptr<SafetensorsFile> open(const std::string &path);
    ~SafetensorsFile();
    SafetensorsFile(const SafetensorsFile &) = delete;
    SafetensorsFile &operator=(const SafetensorsFile &) = delete;

    const std::map<std::string, TensorView> &tensors() const { return tensors_; }
    const TensorView *find(const std::string &name) const;
    const std::string &path() const { return path_; }

private:
    SafetensorsFile() = default;
    std::string path_;
    void *map_ = nullptr;
    size_t map_size_ = 0;
    std::map<std::string, TensorView> tensors_;
};

// Element conversions used when tensors are loaded into the engine's types. They read the
// view's dtype (F32, BF16 or F16) and throw SPECLA_ERR_UNSUPPORTED for any other.
void convert_to_f32(const TensorView &view, float *out);
void convert_to_bf16(const TensorView &view, uint16_t *out);

float bf16_to_f32(uint16_t v);
uint16_t f32_to_bf16(float v);  // round to nearest even, NaN preserved
float f16_to_f32(uint16_t v);

}  // namespace specla
