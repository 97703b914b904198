#include "memory/gpu_arena.h"

#include <cstdlib>
#include <iterator>

#include "util/error.h"

namespace specla {

Arena::Arena(std::unique_ptr<BlockProvider> provider, size_t block_bytes, size_t alignment, size_t budget_bytes)
    : provider_(std::move(provider)), block_bytes_(block_bytes ? block_bytes : kDefaultBlockBytes),
      alignment_(alignment ? alignment : kDefaultAlignment), budget_bytes_(budget_bytes) {
    require((alignment_ & (alignment_ - 1)) == 0, SPECLA_ERR_INVALID_ARGUMENT,
            "arena alignment must be a power of two, got ", alignment_);
    block_bytes_ = round_up(block_bytes_);
}

Arena::~Arena() {
    for (auto &b : blocks_)
        if (b) provider_->release_block(reinterpret_cast<void *>(b->base), b->size);
}

bool Arena::take_from(Block &b, size_t size, size_t &offset_out) {
    auto best = b.free.end();
    for (auto it = b.free.begin(); it != b.free.end(); ++it)
        if (it->second >= size && (best == b.free.end() || it->second < best->second)) best = it;
    if (best == b.free.end()) return false;
    offset_out = best->first;
    const size_t len = best->second;
    b.free.erase(best);
    if (len > size) b.free.emplace(offset_out + size, len - size);
    return true;
}

void *Arena::allocate(size_t bytes, const char *what) {
    const size_t size = round_up(bytes ? bytes : 1);
    std::lock_guard<std::mutex> lock(mu_);
    size_t bi = blocks_.size(), offset = 0;
    // Best fit over the blocks that exist: the smallest free range that holds `size`.
    size_t best_len = SIZE_MAX;
    for (size_t i = 0; i < blocks_.size(); ++i) {
        const Block *b = blocks_[i].get();
        if (!b) continue;
        for (const auto &fr : b->free)
            if (fr.second >= size && fr.second < best_len) best_len = fr.second, bi = i;
    }
    if (bi == blocks_.size()) {
        // A new block: the configured size, or larger for a large request.
        size_t block_size = size > block_bytes_ ? size : block_bytes_;
        // Under a budget, fall back to a block of exactly the request when a full one does not fit.
        if (budget_bytes_ && stats_.reserved_bytes + block_size > budget_bytes_) block_size = size;
        if (budget_bytes_ && stats_.reserved_bytes + block_size > budget_bytes_)
            fail(SPECLA_ERR_OUT_OF_MEMORY, "out of memory on ", provider_->name(), ": ", what, " needs ", size,
                 " bytes; the arena holds ", stats_.reserved_bytes, " bytes (", stats_.used_bytes,
                 " in use) and its budget of ", budget_bytes_, " bytes allows no new block of ", block_size);
        void *base = provider_->allocate_block(block_size);
        if (!base)
            fail(SPECLA_ERR_OUT_OF_MEMORY, "out of memory on ", provider_->name(), ": ", what, " needs ", size,
                 " bytes and a new block of ", block_size, " bytes could not be allocated (the arena holds ",
                 stats_.reserved_bytes, " bytes, ", stats_.used_bytes, " in use)");
        auto blk = std::make_unique<Block>();
        blk->base = reinterpret_cast<uintptr_t>(base);
        blk->size = block_size;
        blk->free.emplace(0, block_size);
        // Reuse a released slot so indices stay small.
        bi = blocks_.size();
        for (size_t i = 0; i < blocks_.size(); ++i)
            if (!blocks_[i]) { bi = i; break; }
        if (bi == blocks_.size()) blocks_.push_back(std::move(blk));
        else blocks_[bi] = std::move(blk);
        stats_.reserved_bytes += block_size;
        stats_.blocks += 1;
    }
    Block &b = *blocks_[bi];
    const bool ok = take_from(b, size, offset);
    if (!ok) fail(SPECLA_ERR_INTERNAL, "arena: chosen block has no fitting range");
    b.live += 1;
    const uintptr_t addr = b.base + offset;
    live_.emplace(addr, Live{bi, offset, size});
    stats_.used_bytes += size;
    stats_.live_allocations += 1;
    if (stats_.used_bytes > stats_.peak_used_bytes) stats_.peak_used_bytes = stats_.used_bytes;
    return reinterpret_cast<void *>(addr);
}

void Arena::free(void *ptr) {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end()) fail(SPECLA_ERR_INTERNAL, "arena: free of an address it did not allocate");
    const Live lv = it->second;
    live_.erase(it);
    Block &b = *blocks_[lv.block];
    size_t off = lv.offset, len = lv.size;
    // Coalesce with the following and the preceding free range.
    auto next = b.free.lower_bound(off);
    if (next != b.free.end() && next->first == off + len) {
        len += next->second;
        next = b.free.erase(next);
    }
    if (next != b.free.begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == off) {
            off = prev->first;
            len += prev->second;
            b.free.erase(prev);
        }
    }
    b.free.emplace(off, len);
    b.live -= 1;
    stats_.used_bytes -= lv.size;
    stats_.live_allocations -= 1;
}

void Arena::trim() {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &b : blocks_) {
        if (!b || b->live) continue;
        provider_->release_block(reinterpret_cast<void *>(b->base), b->size);
        stats_.reserved_bytes -= b->size;
        stats_.blocks -= 1;
        b.reset();
    }
}

ArenaStats Arena::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

size_t Arena::largest_free_range() const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = 0;
    for (const auto &b : blocks_)
        if (b)
            for (const auto &fr : b->free) best = fr.second > best ? fr.second : best;
    return best;
}

Arena &DeviceArenaPool::for_device(int32_t device) {
    std::lock_guard<std::mutex> lock(mu_);
    auto &slot = arenas_[device];
    if (!slot) slot = std::make_unique<Arena>(factory_(device), block_bytes_, Arena::kDefaultAlignment, budget_bytes_);
    return *slot;
}

ArenaStats DeviceArenaPool::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    ArenaStats total;
    for (const auto &kv : arenas_) {
        const ArenaStats s = kv.second->stats();
        total.reserved_bytes += s.reserved_bytes;
        total.used_bytes += s.used_bytes;
        total.peak_used_bytes += s.peak_used_bytes;
        total.blocks += s.blocks;
        total.live_allocations += s.live_allocations;
    }
    return total;
}

void *HostBlockProvider::allocate_block(size_t bytes) {
    // 256-byte alignment like cudaMalloc; aligned_alloc needs a size multiple of the alignment.
    const size_t a = 256;
    return std::aligned_alloc(a, (bytes + a - 1) / a * a);
}

void HostBlockProvider::release_block(void *base, size_t) { std::free(base); }

}  // namespace specla
