// Device-memory arena: takes memory from a BlockProvider in large blocks and sub-allocates from
// them, so that sessions, their states and their scratch never call the driver's allocator once
// a block exists (and never on the decode path).
//
// The bookkeeping knows nothing about CUDA: a block is an opaque base address and a size. The CUDA
// backend plugs in a provider that calls cudaMalloc/cudaFree; the unit test plugs in host malloc.
//
// Invariants:
//  * every allocation starts at a multiple of `alignment` from its block's base (blocks are
//    assumed at least that aligned; cudaMalloc gives 256 B) and its size is rounded up to the
//    alignment, so neighbours never share an alignment unit;
//  * free ranges of a block are kept coalesced: no two free ranges touch;
//  * a failed allocation changes nothing: existing allocations, blocks and statistics stay as
//    they were, and SPECLA_ERR_OUT_OF_MEMORY is thrown.
// Thread-safe: one mutex guards an arena (allocation is never on a hot path).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace specla {

class BlockProvider {
public:
    virtual ~BlockProvider() = default;
    // Returns nullptr when the memory is not available (no exception).
    virtual void *allocate_block(size_t bytes) = 0;
    virtual void release_block(void *base, size_t bytes) = 0;
    // For messages: "CUDA device 0", "host".
    virtual const char *name() const = 0;
};

struct ArenaStats {
    size_t reserved_bytes = 0;  // sum of block sizes
    size_t used_bytes = 0;      // sum of live allocation sizes (after rounding)
    size_t peak_used_bytes = 0;
    int32_t blocks = 0;
    int32_t live_allocations = 0;
};

class Arena {
public:
    static constexpr size_t kDefaultBlockBytes = size_t(256) << 20;
    static constexpr size_t kDefaultAlignment = 256;

    // block_bytes 0 = kDefaultBlockBytes. `budget_bytes` caps the reserved total (0 = no cap):
    // used by tests to exercise the out-of-memory path without exhausting a real device.
    Arena(std::unique_ptr<BlockProvider> provider, size_t block_bytes = 0,
          size_t alignment = kDefaultAlignment, size_t budget_bytes = 0);
    ~Arena();
    Arena(const Arena &) = delete;
    Arena &operator=(const Arena &) = delete;

    // Never returns null; throws specla::Error(SPECLA_ERR_OUT_OF_MEMORY) with the arena unchanged.
    // `what` names the allocation in the message. bytes == 0 is treated as one alignment unit.
    void *allocate(size_t bytes, const char *what = "buffer");
    // Returns the range to its block's free list (coalescing). Null is a no-op; an address this
    // arena did not hand out throws SPECLA_ERR_INTERNAL.
    void free(void *ptr);
    // Gives blocks with no live allocation back to the provider.
    void trim();

    ArenaStats stats() const;
    size_t block_bytes() const { return block_bytes_; }
    size_t alignment() const { return alignment_; }
    // Size of the largest free range in any block (for diagnostics and tests).
    size_t largest_free_range() const;

private:
    struct Block {
        uintptr_t base = 0;
        size_t size = 0;
        std::map<size_t, size_t> free;  // offset -> length, coalesced
        size_t live = 0;                // live allocations in this block
    };
    struct Live {
        size_t block;  // index into blocks_
        size_t offset, size;
    };

    size_t round_up(size_t n) const { return (n + alignment_ - 1) / alignment_ * alignment_; }
    // Best fit inside one block; returns false if nothing fits.
    static bool take_from(Block &b, size_t size, size_t &offset_out);

    std::unique_ptr<BlockProvider> provider_;
    size_t block_bytes_, alignment_, budget_bytes_;
    mutable std::mutex mu_;
    std::vector<std::unique_ptr<Block>> blocks_;  // null entries: released blocks (indices stay)
    std::map<uintptr_t, Live> live_;
    ArenaStats stats_;
};

// RAII owner of one arena allocation.
class ArenaBuffer {
public:
    ArenaBuffer() = default;
    ArenaBuffer(Arena &arena, size_t bytes, const char *what)
        : arena_(&arena), ptr_(arena.allocate(bytes, what)), bytes_(bytes) {}
    ~ArenaBuffer() { reset(); }
    ArenaBuffer(ArenaBuffer &&o) noexcept : arena_(o.arena_), ptr_(o.ptr_), bytes_(o.bytes_) {
        o.arena_ = nullptr, o.ptr_ = nullptr, o.bytes_ = 0;
    }
    ArenaBuffer &operator=(ArenaBuffer &&o) noexcept {
        if (this != &o) {
            reset();
            arena_ = o.arena_, ptr_ = o.ptr_, bytes_ = o.bytes_;
            o.arena_ = nullptr, o.ptr_ = nullptr, o.bytes_ = 0;
        }
        return *this;
    }
    void reset() {
        if (arena_ && ptr_) arena_->free(ptr_);
        arena_ = nullptr, ptr_ = nullptr, bytes_ = 0;
    }
    void *get() const { return ptr_; }
    template <typename T>
    T *as() const { return static_cast<T *>(ptr_); }
    size_t bytes() const { return bytes_; }

private:
    Arena *arena_ = nullptr;
    void *ptr_ = nullptr;
    size_t bytes_ = 0;
};

// One arena per device ordinal, created on first use with the provider the factory makes.
class DeviceArenaPool {
public:
    using ProviderFactory = std::unique_ptr<BlockProvider> (*)(int32_t device);
    DeviceArenaPool(ProviderFactory factory, size_t block_bytes, size_t budget_bytes = 0)
        : factory_(factory), block_bytes_(block_bytes), budget_bytes_(budget_bytes) {}
    Arena &for_device(int32_t device);
    // Sum over devices.
    ArenaStats stats() const;

private:
    ProviderFactory factory_;
    size_t block_bytes_, budget_bytes_;
    mutable std::mutex mu_;
    std::map<int32_t, std::unique_ptr<Arena>> arenas_;
};

// Host-memory provider (tests, and a CPU fallback for the bookkeeping).
class HostBlockProvider final : public BlockProvider {
public:
    void *allocate_block(size_t bytes) override;
    void release_block(void *base, size_t bytes) override;
    const char *name() const override { return "host"; }
};

}  // namespace specla
