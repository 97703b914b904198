#include "generate/text_stream.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"
#include "util/error.h"

namespace specla {

TextStream::TextStream(const Tokenizer *tokenizer, specla_token_callback callback, void *user_data,
                       const char *const *stop_strings, size_t n_stop_strings)
    : callback_(callback), user_data_(user_data) {
    if (n_stop_strings) {
        require(n_stop_strings <= SPECLA_LIMIT_STOP_STRINGS, SPECLA_ERR_INVALID_ARGUMENT, "n_stop_strings is ",
                n_stop_strings, ", more than SPECLA_LIMIT_STOP_STRINGS (", SPECLA_LIMIT_STOP_STRINGS, ")");
        require(stop_strings != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "stop_strings is NULL but n_stop_strings is ",
                n_stop_strings);
        require(tokenizer != nullptr, SPECLA_ERR_STATE, "stop strings need a tokenizer, and this model has none");
        for (size_t i = 0; i < n_stop_strings; ++i) {
            require(stop_strings[i] != nullptr && stop_strings[i][0] != '\0', SPECLA_ERR_INVALID_ARGUMENT,
                    "stop string ", i, " is NULL or empty");
            stops_.emplace_back(stop_strings[i]);
            longest_stop_ = std::max(longest_stop_, stops_.back().size());
        }
    }
    if (tokenizer) decoder_ = std::make_unique<StreamDecoder>(*tokenizer, /*skip_special=*/false);
}

TextStream::~TextStream() = default;

bool TextStream::on_token(int32_t token) {
    std::string piece;
    if (decoder_) piece = decoder_->push(token);
    const size_t before = text_.size();
    text_ += piece;
    bool keep_going = true;
    if (callback_) keep_going = callback_(token, piece.c_str(), user_data_);
    if (!stops_.empty() && !piece.empty()) {
        // Only the region the new piece could complete needs searching.
        const size_t from = before >= longest_stop_ ? before - longest_stop_ + 1 : 0;
        for (const std::string &s : stops_)
            if (text_.find(s, from) != std::string::npos) keep_going = false;
    }
    return keep_going;
}

std::string TextStream::finish() {
    if (!decoder_) return {};
    std::string rest = decoder_->flush();
    text_ += rest;
    if (!rest.empty() && callback_) callback_(-1, rest.c_str(), user_data_);
    return rest;
}

}  // namespace specla
