// A 64-bit checksum of a byte range, for the integrity checks of files the library writes (session
// state files, lib/session/session_state.md) and for fingerprints of what identifies a model. Not
// cryptographic: it detects truncation, bit rot and accidental edits, not a forger.
//
// Definition (so that other implementations can reproduce it): FNV-1a 64 over the range taken as
// little-endian 64-bit words (the last, partial word zero-padded), then the byte length as one more
// word, then the splitmix64 finaliser. Word-wise FNV-1a runs at several GB/s; the finaliser spreads
// every input bit over the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace specla {

class Checksum {
public:
    Checksum &add(const void *data, size_t bytes) {
        const auto *p = static_cast<const unsigned char *>(data);
        length_ += bytes;
        if (fill_) {  // complete a word started by an earlier add
            const size_t take = bytes < 8 - fill_ ? bytes : 8 - fill_;
            std::memcpy(pending_ + fill_, p, take);
            fill_ += take, p += take, bytes -= take;
            if (fill_ < 8) return *this;
            mix(pending_);
            fill_ = 0;
        }
        for (; bytes >= 8; bytes -= 8, p += 8) mix(p);
        if (bytes) std::memcpy(pending_, p, bytes), fill_ = bytes;
        return *this;
    }
    template <typename T>
    Checksum &add_value(const T &v) {
        return add(&v, sizeof v);
    }

    uint64_t value() const {
        uint64_t h = h_;
        if (fill_) {
            unsigned char last[8] = {};
            std::memcpy(last, pending_, fill_);
            h = step(h, load(last));
        }
        h = step(h, uint64_t(length_));
        h ^= h >> 30, h *= 0xbf58476d1ce4e5b9ull;
        h ^= h >> 27, h *= 0x94d049bb133111ebull;
        return h ^ (h >> 31);
    }

private:
    static uint64_t load(const unsigned char *p) {
        uint64_t w = 0;
        for (int i = 7; i >= 0; --i) w = w << 8 | p[i];  // little-endian on any host
        return w;
    }
    static uint64_t step(uint64_t h, uint64_t w) { return (h ^ w) * 0x100000001b3ull; }
    void mix(const unsigned char *p) { h_ = step(h_, load(p)); }

    uint64_t h_ = 0xcbf29ce484222325ull;  // FNV-1a offset basis
    uint64_t length_ = 0;
    unsigned char pending_[8] = {};
    size_t fill_ = 0;
};

inline uint64_t checksum(const void *data, size_t bytes) { return Checksum().add(data, bytes).value(); }

}  // namespace specla
