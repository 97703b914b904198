#include "tokenizer/added_tokens.h"

#include <algorithm>

#include "tokenizer/unicode.h"
#include "tokenizer/utf8.h"

namespace specla::tok {
namespace {

// Code point that ends s (non-empty, valid UTF-8).
uint32_t last_code_point(std::string_view s) {
    size_t i = s.size() - 1;
    while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
    size_t len;
    return utf8_decode(s, i, &len);
}

bool is_word(uint32_t cp) { return (unicode_class(cp) & kClassRustWord) != 0; }

// Start of the run of White_Space that ends s.
size_t trailing_space_start(std::string_view s) {
    size_t end = s.size();
    while (end > 0) {
        size_t i = end - 1;
        while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
        size_t len;
        if (!is_white_space(utf8_decode(s, i, &len))) break;
        end = i;
    }
    return end;
}

// Length of the run of White_Space that starts s.
size_t leading_space_len(std::string_view s) {
    size_t i = 0;
    while (i < s.size()) {
        size_t len;
        if (!is_white_space(utf8_decode(s, i, &len))) break;
        i += len;
    }
    return i;
}

}  // namespace

void AddedTokenMatcher::build(const std::vector<int32_t> &indices,
                              const std::vector<std::string> &patterns) {
    nodes_.assign(1, Node{});
    std::fill(std::begin(first_byte_), std::end(first_byte_), false);
    for (size_t k = 0; k < patterns.size(); ++k) {
        const std::string &p = patterns[k];
        if (p.empty()) continue;
        int32_t node = 0;
        for (unsigned char b : p) {
            int32_t next = child(node, b);
            if (next < 0) {
                next = int32_t(nodes_.size());
                nodes_.push_back(Node{});
                auto &ch = nodes_[size_t(node)].children;
                ch.insert(std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1))),
                          std::make_pair(b, next));
            }
            node = next;
        }
        // The first pattern wins a tie between identical patterns.
        if (nodes_[size_t(node)].token < 0) nodes_[size_t(node)].token = indices[k];
        first_byte_[static_cast<unsigned char>(p[0])] = true;
    }
}

int32_t AddedTokenMatcher::child(int32_t node, unsigned char b) const {
    const auto &ch = nodes_[size_t(node)].children;
    auto it = std::lower_bound(ch.begin(), ch.end(), std::make_pair(b, int32_t(-1)));
    return it != ch.end() && it->first == b ? it->second : -1;
}

int32_t AddedTokenMatcher::longest_at(std::string_view s, size_t i, size_t *end) const {
    int32_t node = 0, best = -1;
    for (size_t j = i; j < s.size(); ++j) {
        node = child(node, static_cast<unsigned char>(s[j]));
        if (node < 0) break;
        if (nodes_[size_t(node)].token >= 0) {
            best = nodes_[size_t(node)].token;
            *end = j + 1;
        }
    }
    return best;
}

void AddedTokenMatcher::split(std::string_view s, const std::vector<AddedToken> &tokens,
                              bool skip_special, std::vector<Segment> &out) const {
    size_t start_offset = 0;
    if (!empty()) {
        size_t i = 0;
        while (i < s.size()) {
            if (!first_byte_[static_cast<unsigned char>(s[i])]) {
                ++i;
                continue;
            }
            size_t stop = 0;
            const int32_t t = longest_at(s, i, &stop);
            if (t < 0) {
                ++i;
                continue;
            }
            size_t start = i;
            i = stop;  // the search resumes after this match even if it is discarded below
            const AddedToken &tok = tokens[size_t(t)];
            if (skip_special && tok.special) continue;
            if (tok.single_word) {
                const bool start_ok = start == 0 || !is_word(last_code_point(s.substr(0, start)));
                size_t len;
                const bool stop_ok = stop == s.size() || !is_word(utf8_decode(s, stop, &len));
                if (!start_ok || !stop_ok) continue;
            }
            if (tok.lstrip) start = std::max(trailing_space_start(s.substr(0, start)), start_offset);
            if (tok.rstrip) stop += leading_space_len(s.substr(stop));
            if (start_offset < start) out.push_back(Segment{start_offset, start, -1});
            out.push_back(Segment{start, stop, t});
            start_offset = stop;
        }
    }
    if (start_offset != s.size()) out.push_back(Segment{start_offset, s.size(), -1});
}

}  // namespace specla::tok
