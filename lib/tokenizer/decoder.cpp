#include "tokenizer/decoder.h"

#include <algorithm>

#include "tokenizer/byte_level.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/utf8.h"

namespace specla::tok {

class DecoderStage {
public:
    virtual ~DecoderStage() = default;
    virtual void token(std::string_view t) = 0;  // a whole token
    virtual void chunk(std::string_view c) = 0;  // a piece of the single, fused token
    virtual void finish() = 0;                   // end of the sequence
    DecoderStage *next = nullptr;
};

namespace {

// The end of every chain: whatever the stages before it pass on (a Replace decoder's content
// next to half a character, say), the text handed out is valid UTF-8. Invalid bytes become U+FFFD
// as in ByteLevel decoding; a character cut between two pushes waits for the next one.
class SinkStage final : public DecoderStage {
public:
    explicit SinkStage(std::string **out) : out_(out) {}
    void token(std::string_view t) override { append(t); }
    void chunk(std::string_view c) override { append(c); }
    void finish() override {
        if (!held_.empty()) utf8_append_lossy(**out_, held_, false);
        held_.clear();
    }

private:
    void append(std::string_view t) {
        if (held_.empty() && utf8_first_invalid(t) == t.size()) {  // the usual case
            (*out_)->append(t);
            return;
        }
        held_.append(t);
        const size_t keep = utf8_append_lossy(**out_, held_, true);
        held_.erase(0, held_.size() - keep);
    }
    std::string **out_;
    std::string held_;  // the valid start of a character that the next piece may complete
};

// No decoder configured: the tokens joined by single spaces.
class JoinStage final : public DecoderStage {
public:
    void token(std::string_view t) override {
        if (count_++ > 0) next->chunk(" ");
        next->chunk(t);
    }
    void chunk(std::string_view c) override { next->chunk(c); }
    void finish() override {
        count_ = 0;
        next->finish();
    }

private:
    size_t count_ = 0;
};

// Byte-level alphabet back to bytes, then bytes to text with U+FFFD for invalid UTF-8. Outputs
// the single fused token; an incomplete trailing character waits for the next token.
class ByteLevelStage final : public DecoderStage {
public:
    void token(std::string_view t) override {
        if (!ByteLevelAlphabet::get().decode(t, pending_)) pending_.append(t);
        emit(false);
    }
    void chunk(std::string_view c) override {
        fused_input_ = true;
        fused_.append(c);
    }
    void finish() override {
        if (fused_input_) {
            if (!ByteLevelAlphabet::get().decode(fused_, pending_)) pending_.append(fused_);
            fused_.clear();
            fused_input_ = false;
        }
        emit(true);
        next->finish();
    }

private:
    void emit(bool final) {
        text_.clear();
        const size_t held = utf8_append_lossy(text_, pending_, !final);
        pending_.erase(0, pending_.size() - held);
        if (!text_.empty()) next->chunk(text_);
    }
    std::string pending_, fused_, text_;
    bool fused_input_ = false;
};

// <0xNN> tokens: runs of them become their bytes when those are valid UTF-8, otherwise one
// U+FFFD per byte.
class ByteFallbackStage final : public DecoderStage {
public:
    void token(std::string_view t) override {
        const int b = byte_of(t);
        if (b >= 0) {
            group_.push_back(char(b));
            return;
        }
        flush_group();
        next->token(t);
    }
    void chunk(std::string_view c) override {
        fused_input_ = true;
        fused_.append(c);
    }
    void finish() override {
        if (fused_input_) {
            std::string whole;
            whole.swap(fused_);
            fused_input_ = false;
            token(whole);
        }
        flush_group();
        next->finish();
    }

private:
    static int hex(char c) {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }
    // The byte of "<0xNN>" (two hex digits, or '+' and one, as the reference's parser allows).
    static int byte_of(std::string_view t) {
        if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
        const int lo = hex(t[4]);
        if (lo < 0) return -1;
        if (t[3] == '+') return lo;
        const int hi = hex(t[3]);
        return hi < 0 ? -1 : hi * 16 + lo;
    }
    void flush_group() {
        if (group_.empty()) return;
        if (utf8_first_invalid(group_) == group_.size()) {
            next->token(group_);
        } else {
            for (size_t i = 0; i < group_.size(); ++i) next->token(kReplacementChar);
        }
        group_.clear();
    }
    std::string group_, fused_;
    bool fused_input_ = false;
};

class FuseStage final : public DecoderStage {
public:
    void token(std::string_view t) override { next->chunk(t); }
    void chunk(std::string_view c) override { next->chunk(c); }
    void finish() override { next->finish(); }
};

class ReplaceStage final : public DecoderStage {
public:
    ReplaceStage(const Regex &pattern, const std::string &content)
        : pattern_(pattern), content_(content) {}
    void token(std::string_view t) override { next->token(replace_all(pattern_, t, content_)); }
    void chunk(std::string_view c) override {
        fused_input_ = true;
        buf_.append(c);
        const std::string &lit = pattern_.source();
        if (!pattern_.is_literal() || lit.empty()) return;  // decided at the end
        // Replace the matches that are complete; keep a tail that could begin one.
        out_.clear();
        size_t pos = 0;
        for (size_t at = buf_.find(lit); at != std::string::npos; at = buf_.find(lit, pos)) {
            out_.append(buf_, pos, at - pos);
            out_ += content_;
            pos = at + lit.size();
        }
        size_t keep_from = buf_.size();
        for (size_t k = std::min(lit.size() - 1, buf_.size() - pos); k > 0; --k) {
            if (buf_.compare(buf_.size() - k, k, lit, 0, k) == 0) {
                keep_from = buf_.size() - k;
                break;
            }
        }
        out_.append(buf_, pos, keep_from - pos);
        buf_.erase(0, keep_from);
        if (!out_.empty()) next->chunk(out_);
    }
    void finish() override {
        if (fused_input_) {
            const std::string rest = replace_all(pattern_, buf_, content_);
            buf_.clear();
            fused_input_ = false;
            if (!rest.empty()) next->chunk(rest);
        }
        next->finish();
    }

private:
    const Regex &pattern_;
    const std::string &content_;
    std::string buf_, out_;
    bool fused_input_ = false;
};

// Strip: up to `start` leading and `stop` trailing copies of one character, per token.
class StripStage final : public DecoderStage {
public:
    StripStage(const std::string &content, size_t start, size_t stop)
        : c_(content), start_(start), stop_(stop) {}
    void token(std::string_view t) override {
        std::vector<size_t> starts;  // byte offset of each character
        for (size_t i = 0; i < t.size(); i += utf8_char_len(t, i))
            starts.push_back(i);
        const size_t n = starts.size();
        auto char_at = [&](size_t k) {
            const size_t end = k + 1 < n ? starts[k + 1] : t.size();
            return t.substr(starts[k], end - starts[k]);
        };
        size_t start_cut = 0;
        for (size_t k = 0; k < std::min(start_, n); ++k) {
            if (char_at(k) != c_) break;
            start_cut = k + 1;
        }
        size_t stop_cut = n;
        for (size_t k = 0; k < std::min(stop_, n); ++k) {
            const size_t index = n - k - 1;
            if (char_at(index) != c_) break;
            stop_cut = index;
        }
        if (stop_cut < start_cut) stop_cut = start_cut;
        const size_t b = start_cut < n ? starts[start_cut] : t.size();
        const size_t e = stop_cut < n ? starts[stop_cut] : t.size();
        next->token(t.substr(b, e - b));
    }
    void chunk(std::string_view c) override {
        out_.clear();
        for (size_t i = 0; i < c.size();) {
            const size_t len = utf8_char_len(c, i);
            const std::string_view ch = c.substr(i, len);
            i += len;
            const bool is_c = ch == c_;
            if (!lead_done_) {
                if (is_c && lead_stripped_ < start_) {
                    ++lead_stripped_;
                    continue;
                }
                lead_done_ = true;
            }
            if (stop_ == 0) {
                out_.append(ch);
            } else if (is_c) {
                ++held_;
                if (held_ > stop_) {
                    out_.append(c_);
                    --held_;
                }
            } else {
                for (; held_ > 0; --held_) out_.append(c_);
                out_.append(ch);
            }
        }
        if (!out_.empty()) next->chunk(out_);
    }
    void finish() override {
        held_ = 0;
        lead_done_ = false;
        lead_stripped_ = 0;
        next->finish();
    }

private:
    const std::string &c_;
    size_t start_, stop_;
    bool lead_done_ = false;
    size_t lead_stripped_ = 0;
    size_t held_ = 0;  // trailing copies of c_ not yet emitted
    std::string out_;
};

// Metaspace: the replacement character back to spaces; in the first token it is dropped
// (unless the prepend scheme is "never").
class MetaspaceStage final : public DecoderStage {
public:
    MetaspaceStage(const std::string &replacement, PrependScheme scheme)
        : r_(replacement), scheme_(scheme) {}
    void token(std::string_view t) override {
        next->token(convert(t, count_++ == 0 && scheme_ != PrependScheme::Never));
    }
    void chunk(std::string_view c) override {
        next->chunk(convert(c, scheme_ != PrependScheme::Never));
    }
    void finish() override {
        count_ = 0;
        next->finish();
    }

private:
    std::string convert(std::string_view t, bool drop) const {
        std::string out;
        out.reserve(t.size());
        for (size_t i = 0; i < t.size();) {
            if (!r_.empty() && t.compare(i, r_.size(), r_) == 0) {
                if (!drop) out.push_back(' ');
                i += r_.size();
            } else {
                out.push_back(t[i++]);
            }
        }
        return out;
    }
    const std::string &r_;
    PrependScheme scheme_;
    size_t count_ = 0;
};

}  // namespace

DecodeState::DecodeState(const std::vector<DecoderStep> &steps) {
    for (const DecoderStep &s : steps) {
        switch (s.kind) {
            case DecoderKind::ByteLevel: stages_.push_back(std::make_unique<ByteLevelStage>()); break;
            case DecoderKind::ByteFallback:
                stages_.push_back(std::make_unique<ByteFallbackStage>());
                break;
            case DecoderKind::Fuse: stages_.push_back(std::make_unique<FuseStage>()); break;
            case DecoderKind::Replace:
                stages_.push_back(std::make_unique<ReplaceStage>(*s.pattern, s.content));
                break;
            case DecoderKind::Strip:
                stages_.push_back(std::make_unique<StripStage>(s.content, s.start, s.stop));
                break;
            case DecoderKind::Metaspace:
                stages_.push_back(std::make_unique<MetaspaceStage>(s.replacement, s.scheme));
                break;
            case DecoderKind::JoinWithSpaces: stages_.push_back(std::make_unique<JoinStage>()); break;
        }
    }
    stages_.push_back(std::make_unique<SinkStage>(&out_));
    for (size_t i = 0; i + 1 < stages_.size(); ++i) stages_[i]->next = stages_[i + 1].get();
}

DecodeState::~DecodeState() = default;

void DecodeState::push(std::string_view token, std::string &out) {
    out_ = &out;
    stages_.front()->token(token);
    out_ = nullptr;
}

void DecodeState::finish(std::string &out) {
    out_ = &out;
    stages_.front()->finish();
    out_ = nullptr;
}

}  // namespace specla::tok
