// Fuzz target: the safetensors reader (lib/model/safetensors.cpp). The input is a whole file:
// 8-byte header length, JSON header, data. A refusal must be a clean status; every tensor the
// reader accepts must have the size its dtype and shape imply and lie inside the data section,
// and all of its bytes are read (conversions for float dtypes, a checksum for the others).
#include <algorithm>
#include <vector>

#include "fuzz_support.h"
#include "model/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz::MemFile file(data, size);
    std::unique_ptr<specla::SafetensorsFile> st;
    try {
        st = specla::SafetensorsFile::open(file.path());
    } catch (const specla::Error &e) {
        fuzz::check_refusal(e);
        return 0;
    }
    // Accepted, so the header length is in the first 8 bytes and fits the file.
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | data[i];
    const size_t data_section = size - 8 - size_t(header_len);

    const uint8_t *lowest = nullptr, *highest = nullptr;
    std::vector<float> f32;
    std::vector<uint16_t> bf16;
    volatile uint8_t checksum = 0;
    for (const auto &[name, view] : st->tensors()) {
        if (st->find(name) != &view) fuzz::finding("find() does not return the listed tensor " + name);
        const size_t elt = specla::dtype_size(view.dtype);
        if (elt != 0 && size_t(view.numel()) * elt != view.bytes)
            fuzz::finding("tensor " + name + ": bytes do not match dtype x shape " + view.shape_string());
        if (view.bytes > data_section) fuzz::finding("tensor " + name + " is larger than the data section");
        if (view.bytes == 0) continue;
        lowest = lowest ? std::min(lowest, view.data) : view.data;
        highest = std::max(highest, view.data + view.bytes);
        if (size_t(highest - lowest) > data_section)
            fuzz::finding("tensor " + name + " lies outside the data section");
        for (size_t i = 0; i < view.bytes; ++i) checksum = checksum + view.data[i];
        if (view.dtype != specla::DType::F32 && view.dtype != specla::DType::BF16 &&
            view.dtype != specla::DType::F16)
            continue;
        f32.resize(size_t(view.numel()));
        bf16.resize(size_t(view.numel()));
        specla::convert_to_f32(view, f32.data());
        specla::convert_to_bf16(view, bf16.data());
    }
    return 0;
}
