// specla::Tokenizer: a Hugging Face tokenizer.json (BPE model: byte-level like GPT-2, or
// SentencePiece-style with byte fallback like Llama) with the same output as the reference
// `tokenizers` library. Immutable after loading; every const member may be called from any
// number of threads at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace specla {

class Tokenizer {
public:
    // Reads folder/tokenizer.json, plus tokenizer_config.json, special_tokens_map.json,
    // generation_config.json and config.json where present (BOS/EOS, BOS prepending).
    // Throws specla::Error: SPECLA_ERR_IO (missing or unreadable file), SPECLA_ERR_FORMAT
    // (malformed JSON or inconsistent content), SPECLA_ERR_UNSUPPORTED (a model, normalizer,
    // pre-tokenizer or decoder type this implementation does not run; the message names it).
    static std::unique_ptr<Tokenizer> load(const std::string &folder);
    // The same from the text of a tokenizer.json alone (no BOS/EOS beyond what it implies).
    static std::unique_ptr<Tokenizer> from_json(std::string_view tokenizer_json);

    ~Tokenizer();
    Tokenizer(const Tokenizer &) = delete;
    Tokenizer &operator=(const Tokenizer &) = delete;

    // UTF-8 text to ids. `add_bos` prepends the BOS token (when there is one); `parse_special`
    // matches special tokens written in the text (added tokens that are not special are always
    // matched, as the reference does). Throws SPECLA_ERR_INVALID_ARGUMENT for invalid UTF-8.
    std::vector<int32_t> encode(std::string_view text, bool add_bos, bool parse_special) const;
    void encode(std::string_view text, bool add_bos, bool parse_special,
                std::vector<int32_t> &out) const;

    // Ids to text; invalid UTF-8 from byte tokens becomes U+FFFD. Throws
    // SPECLA_ERR_TOKEN_OUT_OF_RANGE for an id outside [0, vocab_size()).
    std::string decode(const int32_t *ids, size_t n, bool skip_special) const;

    int32_t vocab_size() const { return int32_t(id_to_token_.size()); }
    int32_t bos_id() const { return bos_id_; }
    int32_t eos_id() const { return eos_id_; }
    bool add_bos_default() const { return add_bos_default_; }
    bool is_special(int32_t id) const {
        return id >= 0 && size_t(id) < special_.size() && special_[size_t(id)];
    }
    // The vocabulary entry of an id as stored in tokenizer.json; nullptr for an id that is out
    // of range or unassigned.
    const std::string *token_to_string(int32_t id) const;
    // The id of a vocabulary entry or added token written exactly as stored, or -1.
    int32_t token_from_string(std::string_view piece) const;

    // For the stream decoder: the configured decoder chain, and the string a token contributes
    // (nullptr when it contributes nothing: unassigned, or special and skipped).
    const std::vector<tok::DecoderStep> &decoder_steps() const { return decoder_; }
    const std::string *decode_piece(int32_t id, bool skip_special) const;

private:
    Tokenizer();
    struct Loader;
    void finalize();  // builds the lookup tables once the parts are set
    void encode_text(std::string_view text, bool at_start, bool parse_special,
                     std::vector<int32_t> &out) const;

    std::unique_ptr<tok::Normalizer> normalizer_;
    std::unique_ptr<tok::PreTokenizer> pre_tokenizer_;
    std::unique_ptr<tok::BpeModel> model_;
    std::vector<tok::DecoderStep> decoder_;
    std::vector<tok::AddedToken> added_;
    tok::AddedTokenMatcher raw_matcher_;         // added tokens with normalized == false
    tok::AddedTokenMatcher normalized_matcher_;  // the others, matched after normalization

    std::vector<std::string> id_to_token_;
    std::vector<bool> assigned_;
    std::vector<bool> special_;
    tok::StringIdMap added_lookup_;
    int32_t bos_id_ = -1, eos_id_ = -1;
    bool add_bos_default_ = false;
};

// Incremental decoding of a token stream (see specla_stream_decoder_push in specla.h): each push
// returns only text that is final; the pieces plus flush() equal decode() of all pushed ids.
class StreamDecoder {
public:
    StreamDecoder(const Tokenizer &tokenizer, bool skip_special);
    // Throws SPECLA_ERR_TOKEN_OUT_OF_RANGE for an id outside [0, vocab_size()).
    std::string push(int32_t id);
    // Everything still held back; the decoder then starts a new sequence.
    std::string flush();

private:
    const Tokenizer &tokenizer_;
    bool skip_special_;
    std::unique_ptr<tok::DecodeState> state_;
};

}  // namespace specla
