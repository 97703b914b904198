#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace specla::tok {

ByteLevelAlphabet::ByteLevelAlphabet() {
    byte_of_.fill(-1);
    uint32_t next_extra = 256;
    for (int b = 0; b < 256; ++b) {
        const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        const uint32_t cp = printable ? uint32_t(b) : next_extra++;
        std::string s;
        utf8_append(s, cp);
        enc_len_[b] = uint8_t(s.size());
        for (size_t i = 0; i < s.size(); ++i) enc_[b][i] = s[i];
        byte_of_[cp] = int16_t(b);
    }
}

const ByteLevelAlphabet &ByteLevelAlphabet::get() {
    static const ByteLevelAlphabet alphabet;
    return alphabet;
}

void ByteLevelAlphabet::encode(std::string_view bytes, std::string &out) const {
    out.reserve(out.size() + bytes.size() * 2);
    for (unsigned char b : bytes) out.append(enc_[b].data(), enc_len_[b]);
}

bool ByteLevelAlphabet::decode(std::string_view s, std::string &out) const {
    const size_t start = out.size();
    size_t i = 0;
    while (i < s.size()) {
        size_t len;
        const uint32_t cp = utf8_decode(s, i, &len);
        const int b = byte_of(cp);
        if (b < 0) {
            out.resize(start);
            return false;
        }
        out.push_back(char(b));
        i += len;
    }
    return true;
}

}  // namespace specla::tok
