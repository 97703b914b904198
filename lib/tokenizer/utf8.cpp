#include "tokenizer/utf8.h"

namespace specla::tok {

void utf8_append(std::string &out, uint32_t cp) {
    if (cp < 0x80) {
        out.push_back(char(cp));
    } else if (cp < 0x800) {
        out.push_back(char(0xC0 | (cp >> 6)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
        out.push_back(char(0xE0 | (cp >> 12)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    } else {
        out.push_back(char(0xF0 | (cp >> 18)));
        out.push_back(char(0x80 | ((cp >> 12) & 0x3F)));
        out.push_back(char(0x80 | ((cp >> 6) & 0x3F)));
        out.push_back(char(0x80 | (cp & 0x3F)));
    }
}

namespace {

// How many bytes of the sequence starting at p[0] (of `avail` bytes) are a valid prefix of one
// character, and how long that character must be. need == 0 means p[0] cannot start one.
struct SeqCheck {
    size_t valid;  // bytes that form a valid (possibly incomplete) prefix
    size_t need;   // total length of the character, 0 for an invalid lead byte
};

inline SeqCheck check_sequence(const unsigned char *p, size_t avail) {
    const unsigned char b = p[0];
    if (b < 0x80) return {1, 1};
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
        need = 2;
    } else if (b >= 0xE0 && b <= 0xEF) {
        need = 3;
        if (b == 0xE0) lo = 0xA0;
        if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        need = 4;
        if (b == 0xF0) lo = 0x90;
        if (b == 0xF4) hi = 0x8F;
    } else {
        return {0, 0};
    }
    size_t k = 1;
    if (k < avail && p[k] >= lo && p[k] <= hi) {
        ++k;
        while (k < need && k < avail && p[k] >= 0x80 && p[k] <= 0xBF) ++k;
    }
    return {k, need};
}

}  // namespace

size_t utf8_first_invalid(std::string_view s) {
    const auto *p = reinterpret_cast<const unsigned char *>(s.data());
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        if (p[i] < 0x80) {
            ++i;
            continue;
        }
        const SeqCheck c = check_sequence(p + i, n - i);
        if (c.need == 0 || c.valid < c.need) return i;
        i += c.need;
    }
    return n;
}

size_t utf8_append_lossy(std::string &out, std::string_view bytes, bool hold_incomplete) {
    const auto *p = reinterpret_cast<const unsigned char *>(bytes.data());
    const size_t n = bytes.size();
    size_t i = 0;
    size_t run = 0;  // start of the current run of valid bytes not yet copied
    while (i < n) {
        if (p[i] < 0x80) {
            ++i;
            continue;
        }
        const SeqCheck c = check_sequence(p + i, n - i);
        if (c.need != 0 && c.valid == c.need) {
            i += c.need;
            continue;
        }
        out.append(bytes.data() + run, i - run);
        if (c.need != 0 && i + c.valid == n && hold_incomplete) {
            // A valid prefix cut off by the end of the input: the caller keeps it.
            return n - i;
        }
        out.append(kReplacementChar);
        i += c.need == 0 ? 1 : c.valid;
        run = i;
    }
    out.append(bytes.data() + run, n - run);
    return 0;
}

}  // namespace specla::tok
