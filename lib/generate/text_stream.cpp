#include "generate/text_stream.h"

#include <algorithm>

#include "specla/specla.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"
#include "util/error.h"

namespace specla {

TextStream::TextStream(TextOptions options) : options_(std::move(options)) {
    const std::vector<std::string> &stops = options_.stop_strings;
    require(stops.size() <= SPECLA_LIMIT_STOP_STRINGS, SPECLA_ERR_INVALID_ARGUMENT, "n_stop_strings is ", stops.size(),
            ", more than SPECLA_LIMIT_STOP_STRINGS (", SPECLA_LIMIT_STOP_STRINGS, ")");
    if (!stops.empty())
        require(options_.tokenizer != nullptr, SPECLA_ERR_STATE, "stop strings need a tokenizer, and this model has none");
    for (size_t i = 0; i < stops.size(); ++i) {
        require(!stops[i].empty(), SPECLA_ERR_INVALID_ARGUMENT, "stop string ", i, " is empty");
        // Generated text is valid UTF-8, so an invalid stop string could never match it whole;
        // valid ones also make every held-back boundary a character boundary.
        const size_t bad = tok::utf8_first_invalid(stops[i]);
        require(bad == stops[i].size(), SPECLA_ERR_INVALID_ARGUMENT, "stop string ", i,
                " is not valid UTF-8 (at byte ", bad, ")");
        longest_stop_ = std::max(longest_stop_, stops[i].size());
    }
    if (options_.tokenizer)
        decoder_ = std::make_unique<StreamDecoder>(*options_.tokenizer, /*skip_special=*/!options_.include_special);
}

TextStream::~TextStream() = default;

TextStream::Piece TextStream::push(int32_t token) {
    if (!decoder_ || stopped_) return {};
    return take(decoder_->push(token));
}

TextStream::Piece TextStream::finish() {
    if (!decoder_ || stopped_) return {};
    Piece p = take(decoder_->flush());
    p.text += held_;  // nothing can complete a stop string any more
    held_.clear();
    stopped_ = true;
    return p;
}

TextStream::Piece TextStream::take(const std::string &decoded) {
    Piece out;
    if (decoded.empty()) return out;
    const bool include = options_.include_stop_string;
    // The window a new match can lie in: recently released bytes (include mode only; otherwise
    // released text never begins a match), the held bytes, the new bytes (from `fresh` on).
    const size_t base = recent_.size();
    std::string window = recent_ + held_ + decoded;
    const size_t fresh = base + held_.size();
    size_t best_end = SIZE_MAX, best_start = 0;
    for (size_t i = 0; i < options_.stop_strings.size(); ++i) {
        const std::string &s = options_.stop_strings[i];
        // Only a match that ends in the new bytes is new: it starts after fresh - s.size().
        const size_t from = fresh + 1 >= s.size() ? fresh + 1 - s.size() : 0;
        const size_t at = window.find(s, from);
        if (at == std::string::npos) continue;
        const size_t end = at + s.size();
        if (end < best_end || (end == best_end && at < best_start)) {
            best_end = end, best_start = at;
            out.stop_index = int32_t(i);
        }
    }
    if (out.stop_index >= 0) {
        const size_t cut = std::max(include ? best_end : best_start, base);
        out.text = window.substr(base, cut - base);
        held_.clear();
        recent_.clear();
        stopped_ = true;
        return out;
    }
    held_.append(decoded);
    const size_t n = include ? held_.size() : releasable();
    out.text = held_.substr(0, n);
    held_.erase(0, n);
    if (include && longest_stop_ > 1) {
        recent_ += out.text;
        if (recent_.size() > longest_stop_ - 1) recent_.erase(0, recent_.size() - (longest_stop_ - 1));
    }
    return out;
}

size_t TextStream::releasable() const {
    size_t keep = 0;  // the longest suffix of held_ that is a proper prefix of a stop string
    for (const std::string &s : options_.stop_strings)
        for (size_t len = std::min(held_.size(), s.size() - 1); len > keep; --len)
            if (held_.compare(held_.size() - len, len, s, 0, len) == 0) {
                keep = len;
                break;
            }
    return held_.size() - keep;
}

}  // namespace specla
