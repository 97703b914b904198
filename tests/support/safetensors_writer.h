// Writing safetensors files in tests (header-only): copies of the fixtures in other dtypes, split
// into shards, or deliberately broken (a header that lies, a wrong shape, a missing tensor).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "support/fixture.h"

namespace test {

// One tensor as it goes into a file: the dtype is the header's string, so that made-up or
// unsupported dtypes can be written too; `data` holds the raw little-endian bytes.
struct StTensor {
    std::string name;
    std::string dtype;
    std::vector<int64_t> shape;
    std::string data;
};

// All tensors of a safetensors file, in the order of their data offsets.
inline std::vector<StTensor> read_tensors(const std::string &path);

// The file bytes of `tensors`: an 8-byte little-endian header length, the JSON header (padded
// with spaces to a multiple of 8), then the data packed in the given order.
inline std::string serialize_safetensors(const std::vector<StTensor> &tensors);
inline void write_safetensors(const std::string &path, const std::vector<StTensor> &tensors);

// A file with an arbitrary header text (need not be JSON) and data section; `declared_len`
// overrides the length written in the first 8 bytes (default: the header's size).
inline std::string frame_safetensors(const std::string &header, const std::string &data,
                                     int64_t declared_len = -1);

// The JSON header text and data section of an existing file's bytes (throws if it has none).
struct StParts {
    std::string header;
    std::string data;
};
inline StParts split_safetensors(const std::string &bytes);

// Converts an F32 tensor to BF16 or F16 (round to nearest even); other tensors are kept.
inline StTensor convert_f32(const StTensor &t, const std::string &dtype);

// Writes `folder`/model-0000i-of-0000n.safetensors (tensors dealt out in contiguous runs) plus
// model.safetensors.index.json mapping each tensor to its shard. Returns the shard file names.
inline std::vector<std::string> write_shards(const std::string &folder,
                                             const std::vector<StTensor> &tensors, int n_shards);

// ---- implementation ------------------------------------------------------------------------

namespace detail {

inline std::string le64(uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[size_t(i)] = char((v >> (8 * i)) & 0xff);
    return s;
}

inline uint32_t f32_bits(float f) {
    uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

inline uint16_t to_bf16(float f) {
    uint32_t b = f32_bits(f);
    if ((b & 0x7fffffffu) > 0x7f800000u) return uint16_t((b >> 16) | 0x40);
    b += 0x7fffu + ((b >> 16) & 1u);
    return uint16_t(b >> 16);
}

// IEEE binary16 with round to nearest even; overflow goes to infinity, tiny values to
// subnormals or zero.
inline uint16_t to_f16(float f) {
    const uint32_t b = f32_bits(f);
    const uint16_t sign = uint16_t((b >> 16) & 0x8000u);
    const uint32_t abs = b & 0x7fffffffu;
    if (abs >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
    const int32_t exp = int32_t(abs >> 23) - 127 + 15;
    uint32_t mant = abs & 0x7fffffu;
    if (exp >= 31) return uint16_t(sign | 0x7c00u);
    if (exp <= 0) {
        if (exp < -10) return sign;
        mant |= 0x800000u;  // implicit bit
        const int shift = 14 - exp;
        uint32_t h = mant >> shift;
        const uint32_t rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) ++h;
        return uint16_t(sign | h);
    }
    uint32_t h = (uint32_t(exp) << 10) | (mant >> 13);
    const uint32_t rem = mant & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // may carry into the exponent: correct
    return uint16_t(sign | h);
}

}  // namespace detail

inline std::vector<StTensor> read_tensors(const std::string &path) {
    const std::string bytes = read_file(path);
    const StParts parts = split_safetensors(bytes);
    const nlohmann::json header = nlohmann::json::parse(parts.header);
    std::vector<std::pair<uint64_t, StTensor>> found;
    for (auto it = header.begin(); it != header.end(); ++it) {
        if (it.key() == "__metadata__") continue;
        const auto &e = it.value();
        StTensor t;
        t.name = it.key();
        t.dtype = e.at("dtype").get<std::string>();
        t.shape = e.at("shape").get<std::vector<int64_t>>();
        const uint64_t begin = e.at("data_offsets").at(0).get<uint64_t>();
        const uint64_t end = e.at("data_offsets").at(1).get<uint64_t>();
        if (begin > end || end > parts.data.size()) throw std::runtime_error("bad offsets in " + path);
        t.data = parts.data.substr(size_t(begin), size_t(end - begin));
        found.emplace_back(begin, std::move(t));
    }
    std::stable_sort(found.begin(), found.end(),
                     [](const auto &a, const auto &b) { return a.first < b.first; });
    std::vector<StTensor> out;
    for (auto &f : found) out.push_back(std::move(f.second));
    return out;
}

inline std::string serialize_safetensors(const std::vector<StTensor> &tensors) {
    nlohmann::ordered_json header = nlohmann::ordered_json::object();
    header["__metadata__"] = {{"format", "pt"}};
    std::string data;
    for (const StTensor &t : tensors) {
        const uint64_t begin = data.size();
        data += t.data;
        header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {begin, uint64_t(data.size())}}};
    }
    std::string text = header.dump();
    while (text.size() % 8) text += ' ';
    return frame_safetensors(text, data);
}

inline void write_safetensors(const std::string &path, const std::vector<StTensor> &tensors) {
    write_file(path, serialize_safetensors(tensors));
}

inline std::string frame_safetensors(const std::string &header, const std::string &data, int64_t declared_len) {
    const uint64_t len = declared_len < 0 ? uint64_t(header.size()) : uint64_t(declared_len);
    return detail::le64(len) + header + data;
}

inline StParts split_safetensors(const std::string &bytes) {
    if (bytes.size() < 8) throw std::runtime_error("not a safetensors file: shorter than 8 bytes");
    uint64_t len = 0;
    for (int i = 7; i >= 0; --i) len = (len << 8) | uint8_t(bytes[size_t(i)]);
    if (len > bytes.size() - 8) throw std::runtime_error("not a safetensors file: header length too large");
    return {bytes.substr(8, size_t(len)), bytes.substr(8 + size_t(len))};
}

inline StTensor convert_f32(const StTensor &t, const std::string &dtype) {
    if (t.dtype != "F32" || dtype == "F32") return t;
    if (dtype != "BF16" && dtype != "F16") throw std::runtime_error("convert_f32: unknown target " + dtype);
    StTensor out = t;
    out.dtype = dtype;
    const size_t n = t.data.size() / 4;
    out.data.assign(n * 2, '\0');
    for (size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, t.data.data() + 4 * i, 4);
        const uint16_t h = dtype == "BF16" ? detail::to_bf16(f) : detail::to_f16(f);
        out.data[2 * i] = char(h & 0xff);
        out.data[2 * i + 1] = char(h >> 8);
    }
    return out;
}

inline std::vector<std::string> write_shards(const std::string &folder, const std::vector<StTensor> &tensors,
                                      int n_shards) {
    if (n_shards < 1) throw std::runtime_error("write_shards: need at least one shard");
    std::vector<std::string> names;
    nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
    uint64_t total = 0;
    const size_t per = (tensors.size() + size_t(n_shards) - 1) / size_t(n_shards);
    for (int s = 0; s < n_shards; ++s) {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
        const size_t lo = std::min(tensors.size(), size_t(s) * per);
        const size_t hi = std::min(tensors.size(), lo + per);
        std::vector<StTensor> part(tensors.begin() + long(lo), tensors.begin() + long(hi));
        for (const StTensor &t : part) weight_map[t.name] = name, total += t.data.size();
        write_safetensors(folder + "/" + name, part);
        names.emplace_back(name);
    }
    nlohmann::ordered_json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file(folder + "/model.safetensors.index.json", index.dump(2));
    return names;
}

}  // namespace test
