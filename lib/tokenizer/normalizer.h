// Normalizers of tokenizer.json: applied to each stretch of text between added tokens before
// pre-tokenization.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"

namespace specla::tok {

class Normalizer {
public:
    virtual ~Normalizer() = default;
    // Rewrites a string in place. `at_start` says whether the text's first character still comes
    // from the very start of the caller's input (what the Metaspace pre-tokenizer's "first"
    // scheme asks); a normalizer that removes or replaces leading characters clears it the way
    // the reference's offset tracking does.
    virtual void normalize(std::string &s, bool &at_start) const = 0;
    void normalize(std::string &s) const {
        bool at_start = false;
        normalize(s, at_start);
    }
};

class SequenceNormalizer final : public Normalizer {
public:
    explicit SequenceNormalizer(std::vector<std::unique_ptr<Normalizer>> steps)
        : steps_(std::move(steps)) {}
    void normalize(std::string &s, bool &at_start) const override;

private:
    std::vector<std::unique_ptr<Normalizer>> steps_;
};

// Prepend / Append: add a fixed string to a non-empty text.
class AffixNormalizer final : public Normalizer {
public:
    AffixNormalizer(std::string affix, bool prepend) : affix_(std::move(affix)), prepend_(prepend) {}
    void normalize(std::string &s, bool &at_start) const override;

private:
    std::string affix_;
    bool prepend_;
};

// Replace every match of a literal or regex pattern.
class ReplaceNormalizer final : public Normalizer {
public:
    ReplaceNormalizer(Regex pattern, std::string content)
        : pattern_(std::move(pattern)), content_(std::move(content)) {}
    void normalize(std::string &s, bool &at_start) const override;

private:
    Regex pattern_;
    std::string content_;
};

// Strip: remove White_Space at either end.
class StripNormalizer final : public Normalizer {
public:
    StripNormalizer(bool left, bool right) : left_(left), right_(right) {}
    void normalize(std::string &s, bool &at_start) const override;

private:
    bool left_, right_;
};

// ByteLevel normalizer: every byte becomes its byte-level alphabet character.
class ByteLevelNormalizer final : public Normalizer {
public:
    void normalize(std::string &s, bool &at_start) const override;
};

// Replaces all matches of `pattern` in `s` by `content` (shared with the Replace decoder).
std::string replace_all(const Regex &pattern, std::string_view s, std::string_view content);

}  // namespace specla::tok
