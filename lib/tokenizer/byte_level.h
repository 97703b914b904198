// The GPT-2 byte-to-unicode alphabet used by byte-level BPE: every byte is shown as a printable
// code point (printable Latin-1 bytes as themselves, the others as U+0100 upwards), so that
// vocabulary entries are valid strings.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace specla::tok {

class ByteLevelAlphabet {
public:
    static const ByteLevelAlphabet &get();

    // UTF-8 of the code point that stands for byte b (1 or 2 bytes).
    std::string_view encoded(uint8_t b) const { return {enc_[b].data(), enc_len_[b]}; }
    // Appends the byte-level form of raw `bytes`.
    void encode(std::string_view bytes, std::string &out) const;
    // The byte a code point stands for, or -1 when it is not in the alphabet.
    int byte_of(uint32_t cp) const { return cp < 324 ? byte_of_[cp] : -1; }
    // Appends the bytes that `s` stands for when every code point of s is in the alphabet and
    // returns true; otherwise leaves `out` unchanged and returns false.
    bool decode(std::string_view s, std::string &out) const;

private:
    ByteLevelAlphabet();
    std::array<std::array<char, 2>, 256> enc_{};
    std::array<uint8_t, 256> enc_len_{};
    std::array<int16_t, 324> byte_of_{};
};

}  // namespace specla::tok
