#include "model/safetensors.h"

#include <sys/mman.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "util/error.h"
#include "util/file_read.h"

namespace specla {

const char *dtype_name(DType t) {
    switch (t) {
        case DType::F32: return "F32";
        case DType::BF16: return "BF16";
        case DType::F16: return "F16";
        case DType::I32: return "I32";
        case DType::I64: return "I64";
        default: return "other";
    }
}

size_t dtype_size(DType t) {
    switch (t) {
        case DType::F32: case DType::I32: return 4;
        case DType::BF16: case DType::F16: return 2;
        case DType::I64: return 8;
        default: return 0;
    }
}

namespace {

// Sizes of dtypes we do not compute with, so that their byte ranges can still be validated.
size_t foreign_dtype_size(const std::string &s) {
    if (s == "F64" || s == "U64") return 8;
    if (s == "U32") return 4;
    if (s == "I16" || s == "U16") return 2;
    if (s == "I8" || s == "U8" || s == "BOOL" || s == "F8_E4M3" || s == "F8_E5M2") return 1;
    return 0;
}

DType parse_dtype(const std::string &s) {
    if (s == "F32") return DType::F32;
    if (s == "BF16") return DType::BF16;
    if (s == "F16") return DType::F16;
    if (s == "I32") return DType::I32;
    if (s == "I64") return DType::I64;
    return DType::Other;
}

}  // namespace

int64_t TensorView::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string TensorView::shape_string() const {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string &path) {
    std::unique_ptr<SafetensorsFile> f(new SafetensorsFile());
    f->path_ = path;
    const ReadOnlyFile file(path);
    const size_t size = size_t(file.size());
    require(size >= 8, SPECLA_ERR_FORMAT, path, ": truncated safetensors file (", size, " bytes, no header)");
    void *map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd(), 0);
    // ENOMEM: no address space left for the mapping (an RLIMIT_AS cap), not a problem of the file.
    if (map == MAP_FAILED) {
        const int map_errno = errno;
        fail(map_errno == ENOMEM ? SPECLA_ERR_OUT_OF_MEMORY : SPECLA_ERR_IO, "cannot map ", path, ": ",
             std::strerror(map_errno));
    }
    f->map_ = map;
    f->map_size_ = size;

    const uint8_t *bytes = static_cast<const uint8_t *>(map);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
    require(header_len <= SPECLA_LIMIT_SAFETENSORS_HEADER_BYTES, SPECLA_ERR_FORMAT, path,
            ": safetensors header length ", header_len, " exceeds the format's limit of ",
            SPECLA_LIMIT_SAFETENSORS_HEADER_BYTES, " bytes (SPECLA_LIMIT_SAFETENSORS_HEADER_BYTES)");
    require(header_len >= 2 && header_len <= size - 8, SPECLA_ERR_FORMAT, path,
            ": safetensors header length ", header_len, " does not fit the file (", size,
            " bytes): truncated or not a safetensors file");
    const char *header_begin = reinterpret_cast<const char *>(bytes + 8);
    nlohmann::json header = nlohmann::json::parse(header_begin, header_begin + header_len, nullptr, false);
    require(!header.is_discarded() && header.is_object(), SPECLA_ERR_FORMAT, path,
            ": safetensors header is not a valid JSON object");

    const uint8_t *data = bytes + 8 + header_len;
    const size_t data_size = size - 8 - header_len;
    struct Range {
        size_t begin, end;
        const std::string *name;
        bool operator<(const Range &o) const { return begin < o.begin || (begin == o.begin && end < o.end); }
    };
    std::vector<Range> ranges;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const auto &e = it.value();
        const std::string &name = it.key();
        require(e.is_object() && e.contains("dtype") && e["dtype"].is_string() && e.contains("shape") &&
                    e["shape"].is_array() && e.contains("data_offsets") && e["data_offsets"].is_array() &&
                    e["data_offsets"].size() == 2,
                SPECLA_ERR_FORMAT, path, ": header entry '", name, "' lacks dtype, shape or data_offsets");
        TensorView v;
        v.name = name;
        v.file = path;
        v.dtype_string = e["dtype"].get<std::string>();
        v.dtype = parse_dtype(v.dtype_string);
        size_t elt = v.dtype == DType::Other ? foreign_dtype_size(v.dtype_string) : dtype_size(v.dtype);
        require(elt != 0, SPECLA_ERR_FORMAT, path, ": tensor '", name, "' has unknown dtype '",
                v.dtype_string, "'");
        uint64_t numel = 1;
        for (const auto &d : e["shape"]) {
            require(d.is_number_unsigned() || (d.is_number_integer() && d.get<int64_t>() >= 0),
                    SPECLA_ERR_FORMAT, path, ": tensor '", name, "' has an invalid shape");
            // Each dimension on its own too: after a zero dimension the product no longer grows,
            // and a dimension beyond int64 would turn negative in the shape.
            const uint64_t dim = d.get<uint64_t>();
            constexpr uint64_t kMaxElements = uint64_t(1) << 48;
            require(dim <= kMaxElements && (dim == 0 || numel <= kMaxElements / dim), SPECLA_ERR_FORMAT, path,
                    ": tensor '", name, "' shape is implausibly large");
            numel *= dim;
            v.shape.push_back(int64_t(dim));
        }
        const auto &off = e["data_offsets"];
        require(off[0].is_number_unsigned() && off[1].is_number_unsigned(), SPECLA_ERR_FORMAT, path,
                ": tensor '", name, "' has invalid data_offsets");
        const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
        require(begin <= end && end <= data_size, SPECLA_ERR_FORMAT, path, ": tensor '", name,
                "' data_offsets [", begin, ", ", end, "] lie outside the data section (", data_size,
                " bytes): the file is truncated or its header is wrong");
        require(end - begin == numel * elt, SPECLA_ERR_FORMAT, path, ": tensor '", name, "' holds ",
                end - begin, " bytes but ", v.dtype_string, " ", v.shape_string(), " needs ", numel * elt);
        v.data = data + begin;
        v.bytes = size_t(end - begin);
        ranges.push_back({size_t(begin), size_t(end), &f->tensors_.emplace(name, std::move(v)).first->first});
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        require(ranges[i].begin >= ranges[i - 1].end, SPECLA_ERR_FORMAT, path, ": tensors '", *ranges[i - 1].name,
                "' and '", *ranges[i].name, "' overlap in the data section");
    return f;
}

SafetensorsFile::~SafetensorsFile() {
    if (map_) munmap(map_, map_size_);
}

const TensorView *SafetensorsFile::find(const std::string &name) const {
    auto it = tensors_.find(name);
    return it == tensors_.end() ? nullptr : &it->second;
}

float bf16_to_f32(uint16_t v) {
    uint32_t bits = uint32_t(v) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

uint16_t f32_to_bf16(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    if ((bits & 0x7fffffffu) > 0x7f800000u) return uint16_t((bits >> 16) | 0x40);  // quiet NaN
    bits += 0x7fffu + ((bits >> 16) & 1u);
    return uint16_t(bits >> 16);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = uint32_t(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else {  // subnormal: renormalise
            exp = 127 - 15 + 1;
            while (!(mant & 0x400u)) mant <<= 1, --exp;
            bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
}

void convert_to_f32(const TensorView &v, float *out) {
    const int64_t n = v.numel();
    switch (v.dtype) {
        case DType::F32: std::memcpy(out, v.data, size_t(n) * 4); break;
        case DType::BF16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t x;
                std::memcpy(&x, v.data + 2 * i, 2);
                out[i] = bf16_to_f32(x);
            }
            break;
        case DType::F16:
            for (int64_t i = 0; i < n; ++i) {
                uint16_t x;
                std::memcpy(&x, v.data + 2 * i, 2);
                out[i] = f16_to_f32(x);
            }
            break;
        default:
            fail(SPECLA_ERR_UNSUPPORTED, v.file, ": tensor '", v.name, "' has dtype ", v.dtype_string,
                 "; weights must be F32, BF16 or F16");
    }
}

void convert_to_bf16(const TensorView &v, uint16_t *out) {
    const int64_t n = v.numel();
    if (v.dtype == DType::BF16) {
        std::memcpy(out, v.data, size_t(n) * 2);
        return;
    }
    std::vector<float> tmp(static_cast<size_t>(n));
    convert_to_f32(v, tmp.data());
    for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(tmp[i]);
}

}  // namespace specla
