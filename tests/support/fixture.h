// Test helpers: paths of the shipped data, reading fla's expected.safetensors, comparisons.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "model/safetensors.h"

namespace test {

std::string data_dir();    // tests/fixtures
std::string models_dir();  // models
std::string fixture_dir(const std::string &name);  // tests/fixtures/<name>

// A temporary folder removed on destruction.
struct TempDir {
    std::string path;
    TempDir();
    ~TempDir();
    std::string file(const std::string &name) const { return path + "/" + name; }
};

void write_file(const std::string &path, const std::string &bytes);
std::string read_file(const std::string &path);
void copy_file(const std::string &from, const std::string &to);

struct Expected {
    std::unique_ptr<specla::SafetensorsFile> file;
    std::vector<float> f32(const std::string &name) const;
    std::vector<int32_t> i32(const std::string &name) const;
    std::vector<int64_t> shape(const std::string &name) const;
};
Expected load_expected(const std::string &fixture);

// max |a-b| / max |b|: relative to the reference's scale, so near-zero entries do not dominate.
double max_rel_error(const float *a, const float *b, size_t n);
int32_t argmax(const float *x, size_t n);

}  // namespace test
