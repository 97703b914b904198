#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specla::tok {
namespace {

// Class of the code point at s[i] for the GPT-2 split: letter, number, space or other.
enum Gpt2Class { kOther, kLetter, kNumber, kSpace };

inline Gpt2Class gpt2_class(const UnicodeClasses &classes, std::string_view s, size_t i,
                            size_t *len) {
    const unsigned char b = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    if (b < 0x80) {
        *len = 1;
        cp = b;
    } else {
        cp = utf8_decode(s, i, len);
    }
    const uint8_t k = classes.of(cp);
    if (k & kClassLetter) return kLetter;
    if (k & kClassNumber) return kNumber;
    if (k & kClassSpace) return kSpace;
    return kOther;
}

// End of the run of characters of class `k` starting at i.
inline size_t run_end(const UnicodeClasses &classes, std::string_view s, size_t i, Gpt2Class k) {
    while (i < s.size()) {
        size_t len;
        if (gpt2_class(classes, s, i, &len) != k) break;
        i += len;
    }
    return i;
}

void push_spans(const Piece &parent, const std::vector<Span> &spans, std::vector<Piece> &out) {
    for (const Span &sp : spans) {
        if (sp.second <= sp.first) continue;
        out.push_back(Piece{parent.text.substr(sp.first, sp.second - sp.first),
                            parent.at_start && sp.first == 0});
    }
}

}  // namespace

void gpt2_split(std::string_view s, std::vector<Span> &out) {
    const UnicodeClasses &classes = UnicodeClasses::get();
    const size_t n = s.size();
    size_t i = 0;
    while (i < n) {
        const char c = s[i];
        if (c == '\'' && i + 1 < n) {
            const char a = s[i + 1];
            if (a == 's' || a == 't' || a == 'm' || a == 'd') {
                out.emplace_back(i, i + 2);
                i += 2;
                continue;
            }
            if (i + 2 < n) {
                const char b = s[i + 2];
                if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) {
                    out.emplace_back(i, i + 3);
                    i += 3;
                    continue;
                }
            }
        }
        size_t len;
        const Gpt2Class k = gpt2_class(classes, s, i, &len);
        if (c == ' ' && i + 1 < n) {
            size_t len2;
            const Gpt2Class k2 = gpt2_class(classes, s, i + 1, &len2);
            if (k2 != kSpace) {  // " ?X+" with the optional space taken
                const size_t end = run_end(classes, s, i + 1 + len2, k2);
                out.emplace_back(i, end);
                i = end;
                continue;
            }
        }
        if (k != kSpace) {
            const size_t end = run_end(classes, s, i + len, k);
            out.emplace_back(i, end);
            i = end;
            continue;
        }
        // \s+(?!\S) | \s+
        size_t end = i + len;
        size_t last_start = i;  // start of the last space character of the run
        while (end < n) {
            size_t l;
            if (gpt2_class(classes, s, end, &l) != kSpace) break;
            last_start = end;
            end += l;
        }
        if (end < n && last_start > i) end = last_start;  // leave one space for the next word
        out.emplace_back(i, end);
        i = end;
    }
}

void split_by_matches(std::string_view s, const std::vector<Span> &matches, bool invert,
                      SplitBehavior behavior, std::vector<Span> &out) {
    struct Item {
        Span span;
        bool flag;  // is_match, then "remove" once the behaviour is applied
    };
    std::vector<Item> items;
    if (s.empty()) {
        items.push_back({{0, 0}, false});
    } else {
        size_t prev = 0;
        for (const Span &m : matches) {
            if (prev != m.first) items.push_back({{prev, m.first}, false});
            items.push_back({m, true});
            prev = m.second;
        }
        if (prev != s.size()) items.push_back({{prev, s.size()}, false});
    }
    if (invert)
        for (Item &it : items) it.flag = !it.flag;

    std::vector<Item> splits;
    switch (behavior) {
        case SplitBehavior::Removed:
            splits = std::move(items);
            break;
        case SplitBehavior::Isolated:
            splits = std::move(items);
            for (Item &it : splits) it.flag = false;
            break;
        case SplitBehavior::Contiguous: {
            bool previous = false;
            for (const Item &it : items) {
                if (it.flag == previous && !splits.empty())
                    splits.back().span.second = it.span.second;
                else
                    splits.push_back({it.span, false});
                previous = it.flag;
            }
            break;
        }
        case SplitBehavior::MergedWithPrevious: {
            bool previous = false;
            for (const Item &it : items) {
                if (it.flag && !previous && !splits.empty())
                    splits.back().span.second = it.span.second;
                else
                    splits.push_back({it.span, false});
                previous = it.flag;
            }
            break;
        }
        case SplitBehavior::MergedWithNext: {
            bool previous = false;
            for (size_t k = items.size(); k-- > 0;) {
                const Item &it = items[k];
                if (it.flag && !previous && !splits.empty())
                    splits.back().span.first = it.span.first;
                else
                    splits.push_back({it.span, false});
                previous = it.flag;
            }
            std::reverse(splits.begin(), splits.end());
            break;
        }
    }
    for (const Item &it : splits)
        if (!it.flag) out.push_back(it.span);
}

void SequencePreTokenizer::apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const {
    for (const auto &step : steps_) step->apply(pieces, scratch);
}

void ByteLevelPreTokenizer::apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const {
    const ByteLevelAlphabet &alphabet = ByteLevelAlphabet::get();
    scratch.clear();
    size_t bytes = 0;
    for (const Piece &p : pieces) bytes += p.text.size();
    scratch.reserve(pieces.size() + (use_regex_ ? bytes / 3 : 0));
    std::vector<Span> spans;
    std::string prefixed;
    for (const Piece &p : pieces) {
        std::string_view text = p.text;
        if (add_prefix_space_ && (text.empty() || text[0] != ' ')) {
            prefixed.assign(1, ' ');
            prefixed += text;
            text = prefixed;
        }
        spans.clear();
        if (use_regex_)
            gpt2_split(text, spans);
        else
            spans.emplace_back(0, text.size());
        for (const Span &sp : spans) {
            if (sp.second <= sp.first) continue;
            Piece out;
            out.at_start = p.at_start && sp.first == 0;
            alphabet.encode(text.substr(sp.first, sp.second - sp.first), out.text);
            scratch.push_back(std::move(out));
        }
    }
    pieces.swap(scratch);
}

void SplitPreTokenizer::apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const {
    scratch.clear();
    std::vector<Span> matches, spans;
    for (const Piece &p : pieces) {
        matches.clear();
        spans.clear();
        pattern_.find_all(p.text, matches);
        split_by_matches(p.text, matches, invert_, behavior_, spans);
        push_spans(p, spans, scratch);
    }
    pieces.swap(scratch);
}

void MetaspacePreTokenizer::apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const {
    scratch.clear();
    std::vector<Span> matches, spans;
    for (Piece &p : pieces) {
        std::string text;
        text.reserve(p.text.size() + replacement_.size());
        for (char c : p.text) {
            if (c == ' ')
                text += replacement_;
            else
                text += c;
        }
        const bool starts = text.compare(0, replacement_.size(), replacement_) == 0;
        if (!starts && (scheme_ == PrependScheme::Always ||
                        (scheme_ == PrependScheme::First && p.at_start)))
            text.insert(0, replacement_);
        Piece whole{std::move(text), p.at_start};
        if (!split_) {
            if (!whole.text.empty()) scratch.push_back(std::move(whole));
            continue;
        }
        matches.clear();
        spans.clear();
        for (size_t at = whole.text.find(replacement_); at != std::string::npos;
             at = whole.text.find(replacement_, at + replacement_.size()))
            matches.emplace_back(at, at + replacement_.size());
        split_by_matches(whole.text, matches, false, SplitBehavior::MergedWithNext, spans);
        push_spans(whole, spans, scratch);
    }
    pieces.swap(scratch);
}

void DigitsPreTokenizer::apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const {
    scratch.clear();
    std::vector<Span> matches, spans;
    for (const Piece &p : pieces) {
        matches.clear();
        spans.clear();
        for (size_t i = 0; i < p.text.size();) {
            size_t len;
            const uint32_t cp = utf8_decode(p.text, i, &len);
            if (unicode_class(cp) & kClassNumber) matches.emplace_back(i, i + len);
            i += len;
        }
        split_by_matches(p.text, matches, false,
                         individual_ ? SplitBehavior::Isolated : SplitBehavior::Contiguous, spans);
        push_spans(p, spans, scratch);
    }
    pieces.swap(scratch);
}

void WhitespacePreTokenizer::apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const {
    scratch.clear();
    std::vector<Span> spans;
    for (const Piece &p : pieces) {
        spans.clear();
        const std::string &s = p.text;
        // Classify: 0 = white space, 1 = word character, 2 = anything else.
        auto kind = [&](size_t i, size_t *len) {
            const uint32_t cp = utf8_decode(s, i, len);
            if (is_white_space(cp)) return 0;
            if (words_ && (unicode_class(cp) & kClassRustWord)) return 1;
            return 2;
        };
        size_t i = 0;
        while (i < s.size()) {
            size_t len;
            const int k = kind(i, &len);
            if (k == 0) {
                i += len;
                continue;
            }
            size_t end = i + len;
            while (end < s.size()) {
                size_t l;
                const int k2 = kind(end, &l);
                if (k2 == 0 || (words_ && k2 != k)) break;
                end += l;
            }
            spans.emplace_back(i, end);
            i = end;
        }
        push_spans(p, spans, scratch);
    }
    pieces.swap(scratch);
}

}  // namespace specla::tok
