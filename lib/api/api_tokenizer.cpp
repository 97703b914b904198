// The tokenizer part of the C API: loading, tokenize/detokenize, vocabulary lookups and the
// streaming detokenizer.
#include <cstring>
#include <string>
#include <vector>

#include "api/guard.h"
#include "api/handles.h"
#include "api/struct_size.h"
#include "tokenizer/tokenizer.h"

struct specla_stream_decoder {
    std::shared_ptr<const specla::Tokenizer> tokenizer;  // keeps the tokenizer alive
    specla::StreamDecoder decoder;
    std::string piece;  // what the last push/flush returned

    specla_stream_decoder(std::shared_ptr<const specla::Tokenizer> t, bool skip_special)
        : tokenizer(std::move(t)), decoder(*tokenizer, skip_special) {}
};

namespace {

const specla::Tokenizer &impl_of(const specla_tokenizer *t) {
    specla::require_arg(t, "tokenizer");
    specla::require(t->impl != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "tokenizer handle is empty");
    return *t->impl;
}

// Copies `text` NUL-terminated into a caller buffer under the header's capacity rules.
void copy_out(const std::string &text, char *out, size_t capacity, size_t *n_needed) {
    if (n_needed) *n_needed = text.size();
    specla::require(capacity >= text.size() + 1, SPECLA_ERR_CAPACITY, "output buffer holds ",
                    capacity, " bytes but ", text.size() + 1,
                    " are needed (text plus terminating NUL)");
    specla::require_arg(out, "out");
    std::memcpy(out, text.data(), text.size());
    out[text.size()] = '\0';
}

}  // namespace

extern "C" {

SPECLA_API specla_status specla_tokenizer_load(const char *folder, specla_tokenizer **out) {
    if (out) *out = nullptr;
    return specla::guarded([&] {
        specla::require_arg(out, "out");
        specla::require_arg(folder, "folder");
        std::shared_ptr<const specla::Tokenizer> impl = specla::Tokenizer::load(folder);
        auto handle = std::make_unique<specla_tokenizer>();
        handle->impl = std::move(impl);
        handle->owned_by_model = false;
        *out = handle.release();
    });
}

SPECLA_API void specla_tokenizer_free(specla_tokenizer *tokenizer) {
    if (tokenizer && !tokenizer->owned_by_model) delete tokenizer;
}

SPECLA_API specla_status specla_model_tokenizer(const specla_model *model,
                                                const specla_tokenizer **out) {
    if (out) *out = nullptr;
    return specla::guarded([&] {
        specla::require_arg(out, "out");
        specla::require_arg(model, "model");
        specla::require(model->tokenizer != nullptr, SPECLA_ERR_STATE,
                        "the model has no tokenizer: its folder has no tokenizer.json, or it was "
                        "loaded with load_tokenizer = false");
        *out = model->tokenizer.get();
    });
}

SPECLA_API specla_status specla_tokenizer_get_info(const specla_tokenizer *tokenizer,
                                                   specla_tokenizer_info *out) {
    return specla::guarded([&] {
        const specla::Tokenizer &t = impl_of(tokenizer);
        specla::require_arg(out, "out");
        specla_tokenizer_info info{};
        info.vocab_size = t.vocab_size();
        info.bos_token_id = t.bos_id();
        info.eos_token_id = t.eos_id();
        info.add_bos_default = t.add_bos_default();
        specla::write_info(out, info, "specla_tokenizer_info");
    });
}

SPECLA_API specla_status specla_tokenize(const specla_tokenizer *tokenizer, const char *text,
                                         size_t text_len, bool add_bos, bool parse_special,
                                         int32_t *out, size_t capacity, size_t *n_needed) {
    return specla::guarded([&] {
        const specla::Tokenizer &t = impl_of(tokenizer);
        specla::require_arg(text, "text");
        std::vector<int32_t> ids;
        t.encode(std::string_view(text, text_len), add_bos, parse_special, ids);
        if (n_needed) *n_needed = ids.size();
        specla::require(ids.size() <= capacity, SPECLA_ERR_CAPACITY, "the text has ", ids.size(),
                        " tokens but the output buffer holds ", capacity);
        if (!ids.empty()) {
            specla::require_arg(out, "out");
            std::memcpy(out, ids.data(), ids.size() * sizeof(int32_t));
        }
    });
}

SPECLA_API specla_status specla_detokenize(const specla_tokenizer *tokenizer, const int32_t *tokens,
                                           size_t n_tokens, bool skip_special, char *out,
                                           size_t capacity, size_t *n_needed) {
    return specla::guarded([&] {
        const specla::Tokenizer &t = impl_of(tokenizer);
        if (n_tokens > 0) specla::require_arg(tokens, "tokens");
        copy_out(t.decode(tokens, n_tokens, skip_special), out, capacity, n_needed);
    });
}

SPECLA_API specla_status specla_token_to_string(const specla_tokenizer *tokenizer, int32_t token,
                                                char *out, size_t capacity, size_t *n_needed) {
    return specla::guarded([&] {
        const specla::Tokenizer &t = impl_of(tokenizer);
        specla::require(token >= 0 && token < t.vocab_size(), SPECLA_ERR_TOKEN_OUT_OF_RANGE,
                        "token id ", token, " is outside [0, ", t.vocab_size(), ")");
        const std::string *s = t.token_to_string(token);
        specla::require(s != nullptr, SPECLA_ERR_INVALID_ARGUMENT, "token id ", token,
                        " has no vocabulary entry");
        copy_out(*s, out, capacity, n_needed);
    });
}

SPECLA_API specla_status specla_token_from_string(const specla_tokenizer *tokenizer,
                                                  const char *piece, int32_t *out) {
    return specla::guarded([&] {
        const specla::Tokenizer &t = impl_of(tokenizer);
        specla::require_arg(piece, "piece");
        specla::require_arg(out, "out");
        const int32_t id = t.token_from_string(piece);
        specla::require(id >= 0, SPECLA_ERR_INVALID_ARGUMENT, "no token is written \"", piece,
                        "\"");
        *out = id;
    });
}

SPECLA_API specla_status specla_stream_decoder_create(const specla_tokenizer *tokenizer,
                                                      bool skip_special,
                                                      specla_stream_decoder **out) {
    if (out) *out = nullptr;
    return specla::guarded([&] {
        specla::require_arg(out, "out");
        impl_of(tokenizer);
        *out = new specla_stream_decoder(tokenizer->impl, skip_special);
    });
}

SPECLA_API specla_status specla_stream_decoder_push(specla_stream_decoder *decoder, int32_t token,
                                                    const char **piece) {
    return specla::guarded([&] {
        specla::require_arg(decoder, "decoder");
        specla::require_arg(piece, "piece");
        *piece = "";
        decoder->piece = decoder->decoder.push(token);
        *piece = decoder->piece.c_str();
    });
}

SPECLA_API specla_status specla_stream_decoder_flush(specla_stream_decoder *decoder,
                                                     const char **piece) {
    return specla::guarded([&] {
        specla::require_arg(decoder, "decoder");
        specla::require_arg(piece, "piece");
        *piece = "";
        decoder->piece = decoder->decoder.flush();
        *piece = decoder->piece.c_str();
    });
}

SPECLA_API void specla_stream_decoder_free(specla_stream_decoder *decoder) { delete decoder; }

}  // extern "C"
