#include "tokenizer/normalizer.h"

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace specla::tok {

void SequenceNormalizer::normalize(std::string &s, bool &at_start) const {
    for (const auto &step : steps_) step->normalize(s, at_start);
}

// Prepended characters take the alignment of the old first character, so at_start is kept.
void AffixNormalizer::normalize(std::string &s, bool &) const {
    if (s.empty()) return;
    if (prepend_)
        s.insert(0, affix_);
    else
        s += affix_;
}

std::string replace_all(const Regex &pattern, std::string_view s, std::string_view content) {
    std::vector<Span> matches;
    pattern.find_all(s, matches);
    if (matches.empty()) return std::string(s);
    std::string out;
    out.reserve(s.size() + matches.size() * content.size());
    size_t last = 0;
    for (const Span &m : matches) {
        out.append(s.data() + last, m.first - last);
        out.append(content);
        last = m.second;
    }
    out.append(s.data() + last, s.size() - last);
    return out;
}

void ReplaceNormalizer::normalize(std::string &s, bool &at_start) const {
    std::vector<Span> matches;
    pattern_.find_all(s, matches);
    if (matches.empty()) return;
    if (at_start && matches.front().first == 0 && matches.front().second > 0) {
        // The reference aligns a replacement with the last character it replaces: it still
        // starts the input only when that is the first character, and only if it is not empty.
        size_t chars = 0;
        for (size_t i = 0; i < matches.front().second; i += utf8_len(static_cast<unsigned char>(s[i])))
            ++chars;
        if (chars > 1 || content_.empty()) at_start = false;
    }
    std::string out;
    out.reserve(s.size() + matches.size() * content_.size());
    size_t last = 0;
    for (const Span &m : matches) {
        out.append(s, last, m.first - last);
        out.append(content_);
        last = m.second;
    }
    out.append(s, last, std::string::npos);
    s.swap(out);
}

void StripNormalizer::normalize(std::string &s, bool &at_start) const {
    size_t begin = 0, end = s.size();
    if (left_) {
        while (begin < end) {
            size_t len;
            if (!is_white_space(utf8_decode(s, begin, &len))) break;
            begin += len;
        }
    }
    if (right_) {
        while (end > begin) {
            size_t start = end - 1;
            while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
            size_t len;
            if (!is_white_space(utf8_decode(s, start, &len))) break;
            end = start;
        }
    }
    if (begin > 0) at_start = false;
    s = s.substr(begin, end - begin);
}

void ByteLevelNormalizer::normalize(std::string &s, bool &) const {
    std::string out;
    ByteLevelAlphabet::get().encode(s, out);
    s.swap(out);
}

}  // namespace specla::tok
