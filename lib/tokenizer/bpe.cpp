#include "tokenizer/bpe.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <mutex>

#include "tokenizer/utf8.h"
#include "util/error.h"

namespace specla::tok {

namespace {
constexpr size_t kCacheShards = 64;
constexpr size_t kCacheSetsPerShard = 256;
constexpr size_t kCacheWays = 4;  // 64 * 256 * 4 = 65536 words, least recently used evicted
constexpr size_t kCacheMaxWordBytes = 256;
constexpr size_t kSmallWord = 48;  // symbols; longer words use the priority queue
}  // namespace

// Word -> ids, a set-associative cache indexed by hash. Each shard has its own lock, so threads
// rarely meet.
struct BpeModel::Cache {
    struct Slot {
        uint64_t hash = 0;
        uint64_t used = 0;  // shard clock at the last use; 0 = empty
        std::string word;
        std::vector<int32_t> ids;
    };
    struct Shard {
        std::mutex mu;
        uint64_t clock = 0;
        std::vector<Slot> slots{kCacheSetsPerShard * kCacheWays};
    };
    Shard shards[kCacheShards];
};

BpeModel::BpeModel(const BpeConfig &c)
    : vocab_list_(c.vocab),
      has_unk_(c.has_unk),
      unk_token_(c.unk_token),
      prefix_(c.continuing_subword_prefix),
      suffix_(c.end_of_word_suffix),
      fuse_unk_(c.fuse_unk),
      byte_fallback_(c.byte_fallback),
      ignore_merges_(c.ignore_merges),
      cache_(std::make_unique<Cache>()) {
    for (const auto &[token, id] : c.vocab) vocab_.set(token, id);
    if (has_unk_) unk_id_ = vocab_.get(unk_token_);
    all_bytes_ = true;
    for (int b = 0; b < 256; ++b) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", b);
        byte_ids_[b] = vocab_.get(name);
        if (byte_ids_[b] < 0) all_bytes_ = false;
    }
    int32_t rank = 0;
    std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> producers;  // merged <- parts
    producers.reserve(c.merges.size());
    for (const auto &[a, b] : c.merges) {
        const int32_t ia = vocab_.get(a), ib = vocab_.get(b);
        if (ia < 0 || ib < 0)
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: merge \"", a, " ", b, "\" uses token \"",
                 ia < 0 ? a : b, "\" that is not in the vocabulary");
        std::string merged = a;
        if (!prefix_.empty() && b.compare(0, prefix_.size(), prefix_) == 0)
            merged.append(b, prefix_.size(), std::string::npos);
        else
            merged += b;
        const int32_t im = vocab_.get(merged);
        if (im < 0)
            fail(SPECLA_ERR_FORMAT, "tokenizer.json: the result \"", merged, "\" of merge \"", a,
                 " ", b, "\" is not in the vocabulary");
        merges_.set(ia, ib, PairMap::Value{rank, im});  // a repeated pair keeps its last rank
        producers.emplace_back(im, std::make_pair(ia, ib));
        ++rank;
    }

    // Which neighbouring start symbols a merge can ever join: the last symbol of a merge's left
    // side next to the first symbol of its right side. Splitting long words elsewhere is exact.
    // Symbols depend on the position in the word when a prefix or suffix is configured, and on
    // their neighbours in the rare unk-before-bytes order, so those models are not split.
    chunkable_ = prefix_.empty() && suffix_.empty() && !(byte_fallback_ && !all_bytes_ && has_unk_);
    if (chunkable_ && !producers.empty()) chunkable_ = find_crossable(producers);
}

bool BpeModel::find_crossable(
    const std::vector<std::pair<int32_t, std::pair<int32_t, int32_t>>> &producers) {
    // Start symbols are single characters, <0xNN> byte tokens and the unknown token. Only the
    // last two can also be the result of a merge; those count as start symbols wherever they
    // sit on a token's left or right spine.
    int32_t max_id = 0;
    for (const auto &kv : vocab_list_) max_id = std::max(max_id, kv.second);
    const size_t n = size_t(max_id) + 1;
    std::vector<std::pair<int32_t, int32_t>> made_from(n, {-1, -1});  // first merge making an id
    for (const auto &[id, parts] : producers)
        if (made_from[size_t(id)].first < 0) made_from[size_t(id)] = parts;
    std::vector<bool> may_start(n, false);
    for (int32_t id : byte_ids_)
        if (id >= 0) may_start[size_t(id)] = true;
    if (unk_id_ >= 0) may_start[size_t(unk_id_)] = true;

    // For each token and spine (left: first symbols, right: last symbols): the start symbol the
    // spine ends in, and the highest spine node that is both made by a merge and a start symbol.
    // Computed once per token (walking each spine from every merge was quadratic in the length
    // of merge chains). A spine that comes back to a token (possible with an empty token) makes
    // the boundaries unknowable: such models are not split.
    struct Spine {
        std::vector<int32_t> end, start_node;
        std::vector<uint8_t> state;  // 0 = not computed, 1 = on the current walk, 2 = done
    };
    Spine spines[2];
    std::vector<int32_t> path;
    auto child = [&](int32_t t, int side) {
        return side == 0 ? made_from[size_t(t)].first : made_from[size_t(t)].second;
    };
    auto compute = [&](int32_t t, int side) {
        Spine &sp = spines[side];
        path.clear();
        // Down the spine to a token that is not made by a merge or already known.
        while (made_from[size_t(t)].first >= 0 && sp.state[size_t(t)] != 2) {
            if (sp.state[size_t(t)] == 1) return false;  // a cycle
            sp.state[size_t(t)] = 1;
            path.push_back(t);
            t = child(t, side);
        }
        int32_t end = t, start_node = -1;
        if (made_from[size_t(t)].first >= 0) {
            end = sp.end[size_t(t)];
            start_node = sp.start_node[size_t(t)];
        }
        for (size_t k = path.size(); k-- > 0;) {
            const int32_t u = path[k];
            if (may_start[size_t(u)]) start_node = u;
            sp.end[size_t(u)] = end;
            sp.start_node[size_t(u)] = start_node;
            sp.state[size_t(u)] = 2;
        }
        return true;
    };
    for (Spine &sp : spines) {
        sp.end.assign(n, -1);
        sp.start_node.assign(n, -1);
        sp.state.assign(n, 0);
    }
    for (size_t t = 0; t < n; ++t)
        if (made_from[t].first >= 0)
            for (int side = 0; side < 2; ++side)
                if (!compute(int32_t(t), side)) return false;

    // The symbols a token can begin (side 0) or end (side 1) with, as start symbols.
    auto end_symbols = [&](int32_t t, int side, std::vector<int32_t> &out) {
        out.clear();
        if (made_from[size_t(t)].first < 0) {
            out.push_back(t);
            return;
        }
        const Spine &sp = spines[side];
        for (int32_t u = sp.start_node[size_t(t)]; u >= 0;) {
            out.push_back(u);
            const int32_t below = child(u, side);
            u = made_from[size_t(below)].first >= 0 ? sp.start_node[size_t(below)] : -1;
        }
        out.push_back(sp.end[size_t(t)]);
    };
    std::vector<int32_t> lefts, rights;
    for (const auto &[id, parts] : producers) {
        end_symbols(parts.first, 1, lefts);
        end_symbols(parts.second, 0, rights);
        for (int32_t l : lefts)
            for (int32_t r : rights) crossable_.set(l, r, PairMap::Value{0, 0});
    }
    return true;
}

BpeModel::~BpeModel() = default;

void BpeModel::initial_symbols(std::string_view w, std::vector<int32_t> &symbols,
                               std::vector<uint32_t> &starts) const {
    bool unk_pending = false;
    size_t unk_start = 0;
    size_t at = 0;  // byte offset of the symbol being added
    auto add = [&](int32_t id) {
        symbols.push_back(id);
        starts.push_back(uint32_t(at));
    };
    auto flush_unk = [&] {
        if (unk_pending) {
            const size_t keep = at;
            at = unk_start;
            add(unk_id_);
            at = keep;
        }
        unk_pending = false;
    };
    std::string s;
    const bool plain = prefix_.empty() && suffix_.empty();
    for (size_t i = 0; i < w.size();) {
        // A byte that does not begin a whole character (never produced by the tokenizer's own
        // stages) is a symbol of its own, so the lookup never reads past the word.
        const size_t len = utf8_char_len(w, i);
        std::string_view sym(w.data() + i, len);
        if (!plain) {
            s.clear();
            if (i != 0) s += prefix_;
            s.append(sym);
            if (i + len == w.size()) s += suffix_;
            sym = s;
        }
        at = i;
        i += len;
        const int32_t id = vocab_.get(sym);
        if (id >= 0) {
            flush_unk();
            add(id);
            continue;
        }
        if (byte_fallback_) {
            bool all = all_bytes_;
            if (!all) {
                all = true;
                for (unsigned char b : sym) all = all && byte_ids_[b] >= 0;
            }
            if (all) {
                for (unsigned char b : sym) {
                    add(byte_ids_[b]);
                    ++at;
                }
                continue;
            }
        }
        if (has_unk_) {
            if (unk_id_ < 0)
                fail(SPECLA_ERR_FORMAT, "tokenizer.json: the unknown token \"", unk_token_,
                     "\" is not in the vocabulary");
            if (unk_pending && !fuse_unk_) {
                const size_t keep = at;
                at = unk_start;
                add(unk_id_);
                at = keep;
            }
            if (!unk_pending || !fuse_unk_) unk_start = at;
            unk_pending = true;
        }
        // Without an unknown token the character is dropped, as the reference does.
    }
    at = w.size();
    flush_unk();
}

void BpeModel::apply_merges(std::vector<int32_t> &ids) const {
    const size_t n = ids.size();
    if (n < 2) return;
    if (n <= kSmallWord) {
        // Short words: rescan the pair ranks; merging the lowest rank, leftmost first.
        int32_t rank[kSmallWord], merged[kSmallWord];
        size_t m = n;
        auto look = [&](size_t i) {
            const PairMap::Value *v = merges_.get(ids[i], ids[i + 1]);
            rank[i] = v ? v->rank : INT32_MAX;
            merged[i] = v ? v->id : -1;
        };
        for (size_t i = 0; i + 1 < m; ++i) look(i);
        while (m > 1) {
            size_t best = 0;
            for (size_t i = 1; i + 1 < m; ++i)
                if (rank[i] < rank[best]) best = i;
            if (rank[best] == INT32_MAX) break;
            ids[best] = merged[best];
            for (size_t i = best + 1; i + 1 < m; ++i) {
                ids[i] = ids[i + 1];
                rank[i] = rank[i + 1];
                merged[i] = merged[i + 1];
            }
            --m;
            if (best > 0) look(best - 1);
            if (best + 1 < m) look(best);
        }
        ids.resize(m);
        return;
    }
    // Long words: a priority queue of candidate merges over a linked list of symbols. A candidate
    // is (rank << 32 | position), so the smallest is the lowest rank, leftmost. Ranks identify
    // merges uniquely, so a candidate is stale exactly when the pair at its position no longer
    // has its rank (one side was merged away); stale candidates are skipped when popped.
    struct Symbol {
        int32_t id;  // -1 once merged into its left neighbour
        int32_t prev, next;
    };
    std::vector<Symbol> sym(n);
    for (size_t i = 0; i < n; ++i)
        sym[i] = Symbol{ids[i], int32_t(i) - 1, i + 1 < n ? int32_t(i + 1) : -1};
    std::vector<uint64_t> heap;
    heap.reserve(n);
    auto push = [&](int32_t rank, int32_t pos) {
        heap.push_back((uint64_t(uint32_t(rank)) << 32) | uint32_t(pos));
        std::push_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    };
    for (size_t i = 0; i + 1 < n; ++i) {
        if (const PairMap::Value *m = merges_.get(sym[i].id, sym[i + 1].id))
            heap.push_back((uint64_t(uint32_t(m->rank)) << 32) | uint32_t(i));
    }
    std::make_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
    while (!heap.empty()) {
        std::pop_heap(heap.begin(), heap.end(), std::greater<uint64_t>());
        const uint64_t top = heap.back();
        heap.pop_back();
        const int32_t rank = int32_t(top >> 32);
        const int32_t pos = int32_t(uint32_t(top));
        Symbol &left = sym[size_t(pos)];
        if (left.id < 0 || left.next < 0) continue;
        Symbol &right = sym[size_t(left.next)];
        const PairMap::Value *m = merges_.get(left.id, right.id);
        if (!m || m->rank != rank) continue;  // stale candidate
        left.id = m->id;
        right.id = -1;
        left.next = right.next;
        if (left.next >= 0) sym[size_t(left.next)].prev = pos;
        if (left.prev >= 0) {
            if (const PairMap::Value *p = merges_.get(sym[size_t(left.prev)].id, left.id))
                push(p->rank, left.prev);
        }
        if (left.next >= 0) {
            if (const PairMap::Value *p = merges_.get(left.id, sym[size_t(left.next)].id))
                push(p->rank, pos);
        }
    }
    ids.clear();
    for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) ids.push_back(sym[size_t(i)].id);
}

bool BpeModel::cache_get(std::string_view key, bool whole, std::vector<int32_t> &out) const {
    const uint64_t h = hash_bytes(key) ^ (whole ? 0 : 0x5bd1e995ull);
    Cache::Shard &shard = cache_->shards[h % kCacheShards];
    Cache::Slot *set = &shard.slots[((h / kCacheShards) % kCacheSetsPerShard) * kCacheWays];
    std::lock_guard<std::mutex> lock(shard.mu);
    for (size_t w = 0; w < kCacheWays; ++w) {
        Cache::Slot &slot = set[w];
        if (slot.used && slot.hash == h && slot.word == key) {
            slot.used = ++shard.clock;
            out.insert(out.end(), slot.ids.begin(), slot.ids.end());
            return true;
        }
    }
    return false;
}

void BpeModel::cache_put(std::string_view key, bool whole, const int32_t *ids, size_t n) const {
    const uint64_t h = hash_bytes(key) ^ (whole ? 0 : 0x5bd1e995ull);
    Cache::Shard &shard = cache_->shards[h % kCacheShards];
    Cache::Slot *set = &shard.slots[((h / kCacheShards) % kCacheSetsPerShard) * kCacheWays];
    std::lock_guard<std::mutex> lock(shard.mu);
    Cache::Slot *victim = set;
    for (size_t w = 1; w < kCacheWays; ++w)
        if (set[w].used < victim->used) victim = &set[w];
    victim->hash = h;
    victim->used = ++shard.clock;
    victim->word.assign(key.data(), key.size());
    victim->ids.assign(ids, ids + n);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t> &out) const {
    if (ignore_merges_) {
        const int32_t id = vocab_.get(word);
        if (id >= 0) {
            out.push_back(id);
            return;
        }
    }
    std::vector<int32_t> ids;
    std::vector<uint32_t> starts;
    ids.reserve(word.size());
    starts.reserve(word.size());
    initial_symbols(word, ids, starts);
    const size_t n = ids.size();
    if (n <= kSmallWord || !chunkable_) {
        apply_merges(ids);
        out.insert(out.end(), ids.begin(), ids.end());
        return;
    }
    // A long word: no merge can join symbols across a boundary whose two sides never meet in
    // any merge, so the stretches between such boundaries are merged (and cached) on their own.
    std::vector<int32_t> chunk;
    size_t a = 0;
    for (size_t i = 0; i < n; ++i) {
        if (i + 1 < n && crossable_.get(ids[i], ids[i + 1])) continue;
        const size_t b = i + 1;  // chunk [a, b)
        if (b - a == 1) {
            out.push_back(ids[a]);
        } else {
            const size_t end = b < n ? starts[b] : word.size();
            const std::string_view key = word.substr(starts[a], end - starts[a]);
            const bool cacheable = key.size() <= kCacheMaxWordBytes;
            if (!cacheable || !cache_get(key, false, out)) {
                chunk.assign(ids.begin() + std::ptrdiff_t(a), ids.begin() + std::ptrdiff_t(b));
                apply_merges(chunk);
                out.insert(out.end(), chunk.begin(), chunk.end());
                if (cacheable) cache_put(key, false, chunk.data(), chunk.size());
            }
        }
        a = b;
    }
}

void BpeModel::tokenize(const std::string &word, std::vector<int32_t> &out) const {
    if (word.empty()) return;
    if (word.size() > kCacheMaxWordBytes) {
        merge_word(word, out);
        return;
    }
    if (cache_get(word, true, out)) return;
    const size_t start = out.size();
    merge_word(word, out);
    cache_put(word, true, out.data() + start, out.size() - start);
}

}  // namespace specla::tok
