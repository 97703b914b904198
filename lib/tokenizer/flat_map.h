// Small open-addressing hash maps for the tokenizer's hot lookups: strings to token ids and
// token-id pairs to merges. Built once, then read-only (safe for concurrent readers).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace specla::tok {

inline uint64_t hash_bytes(std::string_view s) {
    // FNV-1a over 8-byte words, then a final mix.
    uint64_t h = 0xcbf29ce484222325ull ^ s.size();
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
        const uint64_t h = hash_bytes(key);
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
        const uint64_t h = hash_bytes(key);
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
    size_t slot(uint64_t k) const {
        return size_t((k * 0x9E3779B97F4A7C15ull) >> 17) & (keys_.size() - 1);
    }
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
};

}  // namespace specla::tok
