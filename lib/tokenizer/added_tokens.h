// Added tokens (special and ordinary) of tokenizer.json: found in the text before the model
// runs and never split. Matching follows the reference: leftmost-longest over all patterns, then
// the single_word / lstrip / rstrip rules of each token.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace specla::tok {

struct AddedToken {
    std::string content;
    int32_t id = -1;
    bool special = false;
    bool single_word = false;
    bool lstrip = false;
    bool rstrip = false;
    bool normalized = true;
};

// A stretch of the input: text (token < 0) or one added token (its index in the token list).
struct Segment {
    size_t start, end;
    int32_t token;
};

class AddedTokenMatcher {
public:
    // `patterns[k]` is what added token number `indices[k]` looks like in the searched text.
    void build(const std::vector<int32_t> &indices, const std::vector<std::string> &patterns);
    bool empty() const { return nodes_.size() <= 1; }

    // Cuts `s` into text and token segments. Special tokens are ignored when `skip_special`.
    void split(std::string_view s, const std::vector<AddedToken> &tokens, bool skip_special,
               std::vector<Segment> &out) const;

private:
    struct Node {
        std::vector<std::pair<unsigned char, int32_t>> children;  // sorted by byte
        int32_t token = -1;
    };
    int32_t child(int32_t node, unsigned char b) const;
    // Longest pattern starting at s[i]: its end and token, or token -1.
    int32_t longest_at(std::string_view s, size_t i, size_t *end) const;

    std::vector<Node> nodes_;
    bool first_byte_[256] = {};
};

}  // namespace specla::tok
