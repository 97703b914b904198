// Turns generated token ids into streamed text for the user's callback and watches for stop
// strings. Shared by plain and speculative generation.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "specla/specla.h"

namespace specla {

class Tokenizer;
class StreamDecoder;

class TextStream {
public:
    // tokenizer may be null (then pieces are "" and stop strings are refused).
    TextStream(const Tokenizer *tokenizer, specla_token_callback callback, void *user_data,
               const char *const *stop_strings, size_t n_stop_strings);
    ~TextStream();

    // Returns false when generation must stop (callback said so, or a stop string appeared).
    bool on_token(int32_t token);
    // Emit text still held back by the decoder (end of generation). Returns it.
    std::string finish();
    const std::string &text() const { return text_; }

private:
    specla_token_callback callback_;
    void *user_data_;
    std::unique_ptr<StreamDecoder> decoder_;
    std::vector<std::string> stops_;
    size_t longest_stop_ = 0;
    std::string text_;
};

}  // namespace specla
