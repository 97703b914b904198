// The text of a generation as it streams: generated ids through the tokenizer's stream decoder
// (only complete UTF-8 leaves it), special tokens left out unless asked for, and stop strings
// watched for. Shared by every generation (lib/generate/generation.h).
//
// Stop strings: by default the text ends where the first stop string begins, and text that could
// still turn out to be the start of a stop string is held back until it cannot, so released text
// is never taken back. With include_stop_string the text ends right after the stop string (the
// rest of the token that completed it is cut off) and nothing needs holding back. The stop string
// that completes first in the text wins (earliest end; then earliest start; then lowest index).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace specla {

class Tokenizer;
class StreamDecoder;

struct TextOptions {
    const Tokenizer *tokenizer = nullptr;  // null: no text (pieces are ""; stop strings refused)
    std::vector<std::string> stop_strings;
    bool include_special = false;       // special tokens (EOS) appear in the text
    bool include_stop_string = false;   // the text keeps the stop string that ended it
};

class TextStream {
public:
    // Checks the stop strings (non-empty, valid UTF-8, at most SPECLA_LIMIT_STOP_STRINGS, a
    // tokenizer present); throws SPECLA_ERR_INVALID_ARGUMENT / SPECLA_ERR_STATE naming them.
    explicit TextStream(TextOptions options);
    ~TextStream();

    struct Piece {
        std::string text;         // text released by this token: final, never taken back
        int32_t stop_index = -1;  // the stop string this token completed, or -1
    };
    // Once a stop string has completed, further tokens add nothing.
    Piece push(int32_t token);
    // End of generation: the decoder's rest (an incomplete character becomes U+FFFD) and
    // whatever was held back, unless a stop string ended the text (then nothing follows it).
    // A stop string completed by that rest still cuts it (stop_index says which).
    Piece finish();

private:
    // Appends newly decoded bytes to held_, releases what is final, and cuts at a stop string.
    Piece take(const std::string &decoded);
    // How much of held_ may be released: all but its longest suffix that could begin a stop string.
    size_t releasable() const;

    TextOptions options_;
    std::unique_ptr<StreamDecoder> decoder_;
    size_t longest_stop_ = 0;
    std::string held_;    // decoded, not released yet (only while a stop string may be starting)
    std::string recent_;  // include_stop_string: the last released bytes a stop string may span
    bool stopped_ = false;
};

}  // namespace specla
