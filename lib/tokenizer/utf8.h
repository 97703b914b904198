// UTF-8 helpers shared by the tokenizer: decoding code points, validation, lossy conversion of
// arbitrary bytes with the replacement rules of Rust's String::from_utf8_lossy (one U+FFFD per
// maximal invalid subpart), and the Unicode White_Space property.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace specla::tok {

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// Length of the sequence introduced by a lead byte of *valid* UTF-8 (1 for continuation bytes, so
// that loops always advance). Text that may not be valid needs utf8_char_len.
inline size_t utf8_len(unsigned char lead) {
    if (lead < 0x80) return 1;
    if (lead < 0xE0) return lead >= 0xC0 ? 2 : 1;
    if (lead < 0xF0) return 3;
    return 4;
}

// Decodes the code point at s[i] (i < s.size()); *len receives its length in bytes. Bytes that
// do not form a whole character there (a sequence cut by the end of `s`, a stray continuation
// byte) decode one at a time as U+FFFD, so no read leaves `s` whatever it holds.
inline uint32_t utf8_decode(std::string_view s, size_t i, size_t *len) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data()) + i;
    const size_t n = utf8_len(p[0]);
    *len = 1;
    if (n == 1) return p[0] < 0x80 ? p[0] : 0xFFFD;
    if (n > s.size() - i) return 0xFFFD;
    for (size_t k = 1; k < n; ++k)
        if ((p[k] & 0xC0) != 0x80) return 0xFFFD;
    *len = n;
    switch (n) {
        case 2: return (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
        case 3: return (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        default:
            return (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
                   (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    }
}

// Length of the character at s[i] (i < s.size()) as utf8_decode reads it: never past the end.
inline size_t utf8_char_len(std::string_view s, size_t i) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    if (b < 0x80) return 1;
    size_t len;
    utf8_decode(s, i, &len);
    return len;
}

void utf8_append(std::string &out, uint32_t cp);

// Offset of the first byte that is not part of valid UTF-8, or s.size() when all of it is valid.
size_t utf8_first_invalid(std::string_view s);

// Appends `bytes` to `out` with every maximal invalid subpart replaced by U+FFFD (the rules of
// Rust's from_utf8_lossy). When `hold_incomplete` is true, a trailing sequence that is a valid
// but incomplete prefix of a character is not converted: its length is returned so the caller
// can keep those bytes for later; otherwise it becomes one U+FFFD and 0 is returned.
size_t utf8_append_lossy(std::string &out, std::string_view bytes, bool hold_incomplete);

// Unicode White_Space (what Rust's char::is_whitespace and `\s` of the regex crate accept).
inline bool is_white_space(uint32_t c) {
    if (c <= 0x20) return c == 0x20 || (c >= 0x09 && c <= 0x0D);
    if (c < 0x85) return false;
    return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
           c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

}  // namespace specla::tok
