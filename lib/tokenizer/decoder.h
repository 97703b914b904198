// Decoders of tokenizer.json (token strings to text), built as a chain of streaming stages so that
// one implementation serves both whole-sequence decoding and the incremental stream decoder:
// decoding N tokens at once is pushing them one by one and finishing. Each stage receives either
// whole tokens or, once an earlier stage has fused everything into one token (Fuse, ByteLevel),
// chunks of that single token, and holds back only what later input could still change.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"

namespace specla::tok {

enum class DecoderKind {
    ByteLevel,
    Replace,
    ByteFallback,
    Fuse,
    Strip,
    Metaspace,
    JoinWithSpaces,  // no decoder in tokenizer.json: tokens are joined by single spaces
};

struct DecoderStep {
    DecoderKind kind = DecoderKind::Fuse;
    std::shared_ptr<const Regex> pattern;  // Replace
    std::string content;                   // Replace: replacement; Strip: the stripped character
    std::string replacement;               // Metaspace
    PrependScheme scheme = PrependScheme::Always;  // Metaspace
    size_t start = 0, stop = 0;            // Strip
};

class DecoderStage;

// The mutable state of one decoding pass over the configured chain.
class DecodeState {
public:
    explicit DecodeState(const std::vector<DecoderStep> &steps);
    ~DecodeState();
    DecodeState(const DecodeState &) = delete;
    DecodeState &operator=(const DecodeState &) = delete;

    // Feeds one token string; text that became final is appended to `out`.
    void push(std::string_view token, std::string &out);
    // Ends the sequence: everything still held back is appended to `out`.
    void finish(std::string &out);

private:
    std::vector<std::unique_ptr<DecoderStage>> stages_;
    std::string *out_ = nullptr;
};

}  // namespace specla::tok
