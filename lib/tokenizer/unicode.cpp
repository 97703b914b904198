#include "tokenizer/unicode.h"

#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace specla::tok {

UnicodeClasses::UnicodeClasses() {
    // Expand the range tables into a flat class array once, then fold it into unique blocks.
    std::vector<uint8_t> flat(0x110000, 0);
    auto mark = [&](const CodePointRange *r, size_t n, uint8_t bit) {
        for (size_t i = 0; i < n; ++i)
            for (uint32_t c = r[i].lo; c <= r[i].hi; ++c) flat[c] |= bit;
    };
    mark(tables::kLetter, tables::kLetter_count, kClassLetter);
    mark(tables::kNumber, tables::kNumber_count, kClassNumber);
    mark(tables::kWhiteSpace, tables::kWhiteSpace_count, kClassSpace);
    mark(tables::kDecimalNumber, tables::kDecimalNumber_count, kClassDigit);
    mark(tables::kOnigWord, tables::kOnigWord_count, kClassOnigWord);
    mark(tables::kRustWord, tables::kRustWord_count, kClassRustWord);
    std::memcpy(ascii_, flat.data(), 128);

    std::map<std::string, uint16_t> unique;
    std::vector<uint8_t> blocks;
    for (uint32_t b = 0; b < 0x1100; ++b) {
        std::string key(reinterpret_cast<const char *>(flat.data() + size_t(b) * 256), 256);
        auto it = unique.find(key);
        if (it == unique.end()) {
            it = unique.emplace(key, uint16_t(unique.size())).first;
            blocks.insert(blocks.end(), key.begin(), key.end());
        }
        stage1_[b] = it->second;
    }
    blocks_ = std::move(blocks);
}

const UnicodeClasses &UnicodeClasses::get() {
    static const UnicodeClasses classes;
    return classes;
}

}  // namespace specla::tok
