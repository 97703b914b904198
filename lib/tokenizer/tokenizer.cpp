#include "tokenizer/tokenizer.h"

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace specla {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

void Tokenizer::finalize() {
    size_t size = 0;
    for (const auto &[token, id] : model_->vocab()) size = std::max(size, size_t(id) + 1);
    for (const tok::AddedToken &t : added_) size = std::max(size, size_t(t.id) + 1);
    id_to_token_.assign(size, std::string());
    assigned_.assign(size, false);
    special_.assign(size, false);
    for (const auto &[token, id] : model_->vocab()) {
        id_to_token_[size_t(id)] = token;
        assigned_[size_t(id)] = true;
    }
    // Special tokens first, then the others: the order in which the reference searches them.
    std::vector<int32_t> raw_idx, norm_idx;
    std::vector<std::string> raw_pat, norm_pat;
    for (int pass = 0; pass < 2; ++pass) {
        for (size_t k = 0; k < added_.size(); ++k) {
            const tok::AddedToken &t = added_[k];
            if (t.special != (pass == 0)) continue;
            id_to_token_[size_t(t.id)] = t.content;
            assigned_[size_t(t.id)] = true;
            if (t.special) special_[size_t(t.id)] = true;
            added_lookup_.set(t.content, t.id);
            if (t.content.empty()) continue;
            if (t.normalized) {
                std::string pattern = t.content;
                if (normalizer_) normalizer_->normalize(pattern);
                norm_idx.push_back(int32_t(k));
                norm_pat.push_back(std::move(pattern));
            } else {
                raw_idx.push_back(int32_t(k));
                raw_pat.push_back(t.content);
            }
        }
    }
    raw_matcher_.build(raw_idx, raw_pat);
    normalized_matcher_.build(norm_idx, norm_pat);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_bos,
                                       bool parse_special) const {
    std::vector<int32_t> ids;
    encode(text, add_bos, parse_special, ids);
    return ids;
}

void Tokenizer::encode(std::string_view text, bool add_bos, bool parse_special,
                       std::vector<int32_t> &out) const {
    const size_t bad = tok::utf8_first_invalid(text);
    require(bad == text.size(), SPECLA_ERR_INVALID_ARGUMENT,
            "text to tokenize is not valid UTF-8 (at byte ", bad, ")");
    if (add_bos && bos_id_ >= 0) out.push_back(bos_id_);
    std::vector<tok::Segment> segments;
    raw_matcher_.split(text, added_, !parse_special, segments);
    for (const tok::Segment &s : segments) {
        if (s.token >= 0)
            out.push_back(added_[size_t(s.token)].id);
        else
            encode_text(text.substr(s.start, s.end - s.start), s.start == 0, parse_special, out);
    }
}

void Tokenizer::encode_text(std::string_view text, bool at_start, bool parse_special,
                            std::vector<int32_t> &out) const {
    if (text.empty()) return;
    std::string normalized(text);
    if (normalizer_) normalizer_->normalize(normalized, at_start);
    if (normalized.empty()) return;
    std::vector<tok::Segment> segments;
    normalized_matcher_.split(normalized, added_, !parse_special, segments);
    std::vector<tok::Piece> pieces, scratch;
    for (const tok::Segment &s : segments) {
        if (s.token >= 0) {
            out.push_back(added_[size_t(s.token)].id);
            continue;
        }
        if (s.end <= s.start) continue;
        pieces.clear();
        pieces.push_back(tok::Piece{normalized.substr(s.start, s.end - s.start),
                                    at_start && s.start == 0});
        if (pre_tokenizer_) pre_tokenizer_->apply(pieces, scratch);
        for (const tok::Piece &p : pieces) model_->tokenize(p.text, out);
    }
}

const std::string *Tokenizer::token_to_string(int32_t id) const {
    if (id < 0 || size_t(id) >= id_to_token_.size() || !assigned_[size_t(id)]) return nullptr;
    return &id_to_token_[size_t(id)];
}

int32_t Tokenizer::token_from_string(std::string_view piece) const {
    const int32_t id = added_lookup_.get(piece);
    return id >= 0 ? id : model_->token_to_id(piece);
}

const std::string *Tokenizer::decode_piece(int32_t id, bool skip_special) const {
    require(id >= 0 && id < vocab_size(), SPECLA_ERR_TOKEN_OUT_OF_RANGE, "token id ", id,
            " is outside [0, ", vocab_size(), ")");
    if (!assigned_[size_t(id)]) return nullptr;  // a hole in the id space decodes to nothing
    if (skip_special && special_[size_t(id)]) return nullptr;
    return &id_to_token_[size_t(id)];
}

std::string Tokenizer::decode(const int32_t *ids, size_t n, bool skip_special) const {
    tok::DecodeState state(decoder_);
    std::string out;
    for (size_t i = 0; i < n; ++i) {
        if (const std::string *piece = decode_piece(ids[i], skip_special)) state.push(*piece, out);
    }
    state.finish(out);
    return out;
}

StreamDecoder::StreamDecoder(const Tokenizer &tokenizer, bool skip_special)
    : tokenizer_(tokenizer),
      skip_special_(skip_special),
      state_(std::make_unique<tok::DecodeState>(tokenizer.decoder_steps())) {}

std::string StreamDecoder::push(int32_t id) {
    std::string out;
    if (const std::string *piece = tokenizer_.decode_piece(id, skip_special_))
        state_->push(*piece, out);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    state_->finish(out);
    state_ = std::make_unique<tok::DecodeState>(tokenizer_.decoder_steps());
    return out;
}

}  // namespace specla
