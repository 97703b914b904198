// The BPE model of tokenizer.json: a word (one pre-tokenized piece) becomes its characters'
// tokens, then adjacent pairs merge by rank (lowest first, leftmost among equals) until no pair
// merges. Characters missing from the vocabulary become <0xNN> byte tokens (byte_fallback) or the
// unknown token. Results for short words are cached; the cache is sharded and locked, so one model
// serves any number of threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tokenizer/flat_map.h"

namespace specla::tok {

struct BpeConfig {
    std::vector<std::pair<std::string, int32_t>> vocab;
    std::vector<std::pair<std::string, std::string>> merges;  // in rank order
    bool has_unk = false;
    std::string unk_token;
    std::string continuing_subword_prefix;  // "" = none
    std::string end_of_word_suffix;         // "" = none
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
};

class BpeModel {
public:
    // Throws SPECLA_ERR_FORMAT when a merge names a token missing from the vocabulary.
    explicit BpeModel(const BpeConfig &config);
    ~BpeModel();

    // Appends the ids of one word.
    void tokenize(const std::string &word, std::vector<int32_t> &out) const;

    int32_t token_to_id(std::string_view token) const { return vocab_.get(token); }
    const std::vector<std::pair<std::string, int32_t>> &vocab() const { return vocab_list_; }

private:
    void merge_word(std::string_view word, std::vector<int32_t> &out) const;
    // The ids of the word's characters before any merge, and the byte offset where each starts.
    void initial_symbols(std::string_view word, std::vector<int32_t> &ids,
                         std::vector<uint32_t> &starts) const;
    void apply_merges(std::vector<int32_t> &ids) const;
    // Fills crossable_ from the merges (merged id <- parts); false when the model's merges make
    // word boundaries unknowable, so that long words must not be split.
    bool find_crossable(const std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> &producers);
    // The word cache; whole words and stretches of long words are kept apart.
    bool cache_get(std::string_view key, bool whole, std::vector<int32_t> &out) const;
    void cache_put(std::string_view key, bool whole, const int32_t *ids, size_t n) const;

    StringIdMap vocab_;
    std::vector<std::pair<std::string, int32_t>> vocab_list_;
    PairMap merges_;
    PairMap crossable_;  // (last symbol of a left side, first symbol of a right side) of merges
    bool chunkable_ = false;
    std::array<int32_t, 256> byte_ids_{};  // ids of <0xNN>, -1 when missing
    bool all_bytes_ = false;
    bool has_unk_ = false;
    int32_t unk_id_ = -1;
    std::string unk_token_;
    std::string prefix_, suffix_;
    bool fuse_unk_ = false, byte_fallback_ = false, ignore_merges_ = false;

    struct Cache;
    std::unique_ptr<Cache> cache_;
};

}  // namespace specla::tok
