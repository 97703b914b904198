// Pre-tokenizers of tokenizer.json: split normalized text into the pieces the model tokenizes
// one by one.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace specla::tok {

struct Piece {
    std::string text;
    bool at_start = false;  // begins at offset 0 of the caller's whole input
};

class PreTokenizer {
public:
    virtual ~PreTokenizer() = default;
    // Replaces `pieces` with their split (empty results are dropped); `scratch` is a buffer the
    // implementation may use.
    virtual void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const = 0;
};

class SequencePreTokenizer final : public PreTokenizer {
public:
    explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps)
        : steps_(std::move(steps)) {}
    void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const override;

private:
    std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// ByteLevel: optional prefix space, the GPT-2 split, then bytes to the byte-level alphabet.
class ByteLevelPreTokenizer final : public PreTokenizer {
public:
    ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
        : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
    void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const override;

private:
    bool add_prefix_space_, use_regex_;
};

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class SplitPreTokenizer final : public PreTokenizer {
public:
    SplitPreTokenizer(Regex pattern, SplitBehavior behavior, bool invert)
        : pattern_(std::move(pattern)), behavior_(behavior), invert_(invert) {}
    void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const override;

private:
    Regex pattern_;
    SplitBehavior behavior_;
    bool invert_;
};

enum class PrependScheme { First, Always, Never };

class MetaspacePreTokenizer final : public PreTokenizer {
public:
    MetaspacePreTokenizer(std::string replacement, PrependScheme scheme, bool split)
        : replacement_(std::move(replacement)), scheme_(scheme), split_(split) {}
    void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const override;

private:
    std::string replacement_;  // one character
    PrependScheme scheme_;
    bool split_;
};

// Digits: numbers apart from the rest, each digit alone when `individual`.
class DigitsPreTokenizer final : public PreTokenizer {
public:
    explicit DigitsPreTokenizer(bool individual) : individual_(individual) {}
    void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const override;

private:
    bool individual_;
};

// WhitespaceSplit (split on White_Space, dropping it) and Whitespace (\w+|[^\w\s]+).
class WhitespacePreTokenizer final : public PreTokenizer {
public:
    explicit WhitespacePreTokenizer(bool words_and_symbols) : words_(words_and_symbols) {}
    void apply(std::vector<Piece> &pieces, std::vector<Piece> &scratch) const override;

private:
    bool words_;
};

// The spans of the GPT-2 pattern 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|
// \s+(?!\S)|\s+ over `s` (exposed for tests).
void gpt2_split(std::string_view s, std::vector<Span> &out);

// Applies a split behaviour to the match list of `s` (the reference's NormalizedString::split):
// appends the kept pieces' spans to `out`.
void split_by_matches(std::string_view s, const std::vector<Span> &matches, bool invert,
                      SplitBehavior behavior, std::vector<Span> &out);

}  // namespace specla::tok
