#include "support/fixture.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace test {

std::string data_dir() { return SPECLA_TEST_DATA_DIR; }
std::string models_dir() { return SPECLA_MODELS_DIR; }
std::string fixture_dir(const std::string &name) { return data_dir() + "/" + name; }

TempDir::TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "specla-test-XXXXXX").string();
    if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path = tmpl;
}
TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

void write_file(const std::string &path, const std::string &bytes) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), std::streamsize(bytes.size()));
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string &path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

void copy_file(const std::string &from, const std::string &to) { write_file(to, read_file(from)); }

Expected load_expected(const std::string &fixture) {
    Expected e;
    e.file = specla::SafetensorsFile::open(fixture_dir(fixture) + "/expected.safetensors");
    return e;
}

std::vector<float> Expected::f32(const std::string &name) const {
    const specla::TensorView *v = file->find(name);
    if (!v || v->dtype != specla::DType::F32) throw std::runtime_error("fixture lacks F32 tensor " + name);
    std::vector<float> out(size_t(v->numel()));
    specla::convert_to_f32(*v, out.data());
    return out;
}

std::vector<int32_t> Expected::i32(const std::string &name) const {
    const specla::TensorView *v = file->find(name);
    if (!v || v->dtype != specla::DType::I32) throw std::runtime_error("fixture lacks I32 tensor " + name);
    std::vector<int32_t> out(size_t(v->numel()));
    std::memcpy(out.data(), v->data, v->bytes);
    return out;
}

std::vector<int64_t> Expected::shape(const std::string &name) const {
    const specla::TensorView *v = file->find(name);
    if (!v) throw std::runtime_error("fixture lacks tensor " + name);
    return v->shape;
}

double max_rel_error(const float *a, const float *b, size_t n) {
    double diff = 0, scale = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i])) return INFINITY;
        diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::fabs(double(b[i])));
    }
    return scale > 0 ? diff / scale : diff;
}

int32_t argmax(const float *x, size_t n) {
    size_t best = 0;
    for (size_t i = 1; i < n; ++i)
        if (x[i] > x[best]) best = i;
    return int32_t(best);
}

}  // namespace test
