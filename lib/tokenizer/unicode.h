// Unicode character classes as the reference tokenizers see them (see gen_unicode_tables.py):
// letters, numbers, decimal digits, White_Space and the two flavours of "word character".
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace specla::tok {

struct CodePointRange {
    uint32_t lo, hi;  // inclusive
};

namespace tables {
extern const CodePointRange kLetter[];
extern const size_t kLetter_count;
extern const CodePointRange kNumber[];
extern const size_t kNumber_count;
extern const CodePointRange kDecimalNumber[];
extern const size_t kDecimalNumber_count;
extern const CodePointRange kWhiteSpace[];
extern const size_t kWhiteSpace_count;
extern const CodePointRange kOnigWord[];
extern const size_t kOnigWord_count;
extern const CodePointRange kRustWord[];
extern const size_t kRustWord_count;
}  // namespace tables

enum UnicodeClass : uint8_t {
    kClassLetter = 1,       // \p{L}
    kClassNumber = 2,       // \p{N}
    kClassSpace = 4,        // \s (White_Space)
    kClassDigit = 8,        // \d (\p{Nd})
    kClassOnigWord = 16,    // \w in pre-tokenizer patterns
    kClassRustWord = 32,    // \w in the added-token word test
};

class UnicodeClasses {
public:
    static const UnicodeClasses &get();
    uint8_t of(uint32_t cp) const {
        if (cp < 128) return ascii_[cp];
        if (cp >= 0x110000) return 0;
        return blocks_[size_t(stage1_[cp >> 8]) * 256 + (cp & 0xFF)];
    }

private:
    UnicodeClasses();
    uint8_t ascii_[128];
    uint16_t stage1_[0x1100];
    std::vector<uint8_t> blocks_;  // the unique 256-entry blocks
};

inline uint8_t unicode_class(uint32_t cp) { return UnicodeClasses::get().of(cp); }

}  // namespace specla::tok
