// Small open-addressing hash maps for the tokenizer's hot lookups: strings to token ids and
// token-id pairs to merges. Built once, then read-only (safe for concurrent readers).
//
// Keys come from tokenizer.json, so a file could choose them to collide and turn every insert
// into a walk along one probe chain (quadratic loading). The maps therefore hash with a seed
// chosen at random once per process, which no file can know; lookups give the same answers
// whatever the seed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <string_view>
#include <vector>

namespace specla::tok {

inline uint64_t hash_seed() {
    static const uint64_t seed = [] {
        uint64_t s = uint64_t(std::chrono::steady_clock::now().time_since_epoch().count());
        try {
            std::random_device rd;
            s ^= (uint64_t(rd()) << 32) ^ rd();
        } catch (...) {  // no entropy source: the clock and an address still vary per process
            s ^= uint64_t(reinterpret_cast<uintptr_t>(&s));
        }
        return s;
    }();
    return seed;
}

// A bijective 64-bit mix (the splitmix64 finalizer): every output bit depends on every input bit.
inline uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

inline uint64_t hash_bytes(std::string_view s, uint64_t seed = 0) {
    // FNV-1a over 8-byte words, then a final mix. The seed enters the initial state, so that
    // colliding strings cannot be built without knowing it.
    uint64_t h = 0xcbf29ce484222325ull ^ mix64(seed) ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, s.data() + i, 8);
        h = (h ^ w) * 0x100000001b3ull;
        h ^= h >> 29;
    }
    uint64_t tail = 0;
    if (i < s.size()) std::memcpy(&tail, s.data() + i, s.size() - i);
    h = (h ^ tail) * 0x100000001b3ull;
    h ^= h >> 32;
    h *= 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    return h;
}

// String -> non-negative int32 map. Keys are copied into one arena.
class StringIdMap {
public:
    // Inserts or overwrites.
    void set(std::string_view key, int32_t value) {
        if ((count_ + 1) * 4 > slots_.size() * 3) grow();
        const uint64_t h = hash_bytes(key, seed_);
        size_t i = h & (slots_.size() - 1);
        while (slots_[i].value != kEmpty) {
            if (slots_[i].hash == h && view(slots_[i]) == key) {
                slots_[i].value = value;
                return;
            }
            i = (i + 1) & (slots_.size() - 1);
        }
        Slot s;
        s.hash = h;
        s.offset = uint32_t(arena_.size());
        s.length = uint32_t(key.size());
        s.value = value;
        arena_.append(key);
        slots_[i] = s;
        ++count_;
    }
    // The value, or -1.
    int32_t get(std::string_view key) const {
        if (slots_.empty()) return -1;
        const uint64_t h = hash_bytes(key, seed_);
        size_t i = h & (slots_.size() - 1);
        while (slots_[i].value != kEmpty) {
            if (slots_[i].hash == h && view(slots_[i]) == key) return slots_[i].value;
            i = (i + 1) & (slots_.size() - 1);
        }
        return -1;
    }
    size_t size() const { return count_; }

private:
    static constexpr int32_t kEmpty = -1;
    struct Slot {
        uint64_t hash = 0;
        uint32_t offset = 0, length = 0;
        int32_t value = kEmpty;
    };
    std::string_view view(const Slot &s) const { return {arena_.data() + s.offset, s.length}; }
    void grow() {
        std::vector<Slot> old;
        old.swap(slots_);
        slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{});
        for (const Slot &s : old) {
            if (s.value < 0) continue;
            size_t i = s.hash & (slots_.size() - 1);
            while (slots_[i].value != kEmpty) i = (i + 1) & (slots_.size() - 1);
            slots_[i] = s;
        }
    }
    std::vector<Slot> slots_;
    std::string arena_;
    size_t count_ = 0;
    uint64_t seed_ = hash_seed();
};

// (left id, right id) -> (rank, merged id).
class PairMap {
public:
    struct Value {
        int32_t rank;
        int32_t id;
    };
    void set(int32_t a, int32_t b, Value v) {
        if ((count_ + 1) * 2 > keys_.size()) grow();
        const uint64_t k = key(a, b);
        size_t i = slot(k);
        while (keys_[i] != kEmpty) {
            if (keys_[i] == k) {
                values_[i] = v;
                return;
            }
            i = (i + 1) & (keys_.size() - 1);
        }
        keys_[i] = k;
        values_[i] = v;
        ++count_;
    }
    // nullptr when the pair does not merge.
    const Value *get(int32_t a, int32_t b) const {
        if (keys_.empty()) return nullptr;
        const uint64_t k = key(a, b);
        size_t i = slot(k);
        while (keys_[i] != kEmpty) {
            if (keys_[i] == k) return &values_[i];
            i = (i + 1) & (keys_.size() - 1);
        }
        return nullptr;
    }

private:
    static constexpr uint64_t kEmpty = ~uint64_t(0);
    static uint64_t key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
    // All 64 bits of the key reach the slot (a plain multiply-shift left pairs that differ only
    // in their left id, the high bits, in one chain).
    size_t slot(uint64_t k) const { return size_t(mix64(k ^ seed_)) & (keys_.size() - 1); }
    void grow() {
        std::vector<uint64_t> old_keys;
        std::vector<Value> old_values;
        old_keys.swap(keys_);
        old_values.swap(values_);
        const size_t cap = old_keys.empty() ? 64 : old_keys.size() * 2;
        keys_.assign(cap, kEmpty);
        values_.assign(cap, Value{0, 0});
        for (size_t j = 0; j < old_keys.size(); ++j) {
            if (old_keys[j] == kEmpty) continue;
            size_t i = slot(old_keys[j]);
            while (keys_[i] != kEmpty) i = (i + 1) & (keys_.size() - 1);
            keys_[i] = old_keys[j];
            values_[i] = old_values[j];
        }
    }
    std::vector<uint64_t> keys_;
    std::vector<Value> values_;
    size_t count_ = 0;
    uint64_t seed_ = hash_seed();
};

}  // namespace specla::tok
