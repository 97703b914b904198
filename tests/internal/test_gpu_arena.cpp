// The device arena's bookkeeping, on host memory (no GPU needed): alignment, reuse after free,
// coalescing, statistics, large requests, per-device pools and the out-of-memory path.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "memory/gpu_arena.h"
#include "util/error.h"

using namespace specla;

namespace {

// A host provider that counts calls and can be told to refuse.
class CountingProvider final : public BlockProvider {
public:
    int allocations = 0, releases = 0;
    bool refuse = false;
    void *allocate_block(size_t bytes) override {
        if (refuse) return nullptr;
        ++allocations;
        return host.allocate_block(bytes);
    }
    void release_block(void *base, size_t bytes) override {
        ++releases;
        host.release_block(base, bytes);
    }
    const char *name() const override { return "test host"; }
    HostBlockProvider host;
};

uintptr_t addr(void *p) { return reinterpret_cast<uintptr_t>(p); }

}  // namespace

TEST_CASE("arena: alignment, rounding and statistics") {
    auto prov = std::make_unique<CountingProvider>();
    CountingProvider *pv = prov.get();
    Arena a(std::move(prov), 1 << 20);
    void *p1 = a.allocate(1, "one byte");
    void *p2 = a.allocate(300, "300 bytes");
    void *p3 = a.allocate(256, "256 bytes");
    CHECK(addr(p1) % 256 == 0);
    CHECK(addr(p2) % 256 == 0);
    CHECK(addr(p3) % 256 == 0);
    CHECK(pv->allocations == 1);
    ArenaStats s = a.stats();
    CHECK(s.blocks == 1);
    CHECK(s.reserved_bytes == (1u << 20));
    CHECK(s.used_bytes == 256 + 512 + 256);
    CHECK(s.live_allocations == 3);
    // Ranges do not overlap and are writable.
    std::memset(p1, 1, 256);
    std::memset(p2, 2, 512);
    std::memset(p3, 3, 256);
    CHECK(static_cast<unsigned char *>(p1)[255] == 1);
    CHECK(static_cast<unsigned char *>(p2)[0] == 2);
    a.free(p2);
    s = a.stats();
    CHECK(s.used_bytes == 512);
    CHECK(s.peak_used_bytes == 1024);
    CHECK(s.live_allocations == 2);
    a.free(p1);
    a.free(p3);
    CHECK(a.stats().used_bytes == 0);
    CHECK(a.largest_free_range() == (1u << 20));  // fully coalesced again
    a.free(nullptr);                               // no-op
}

TEST_CASE("arena: reuse after free and coalescing of neighbours") {
    Arena a(std::make_unique<HostBlockProvider>(), 64 * 1024);
    void *x = a.allocate(4096), *y = a.allocate(4096), *z = a.allocate(4096);
    a.free(y);
    // A request of the freed size lands exactly in the hole (best fit).
    void *y2 = a.allocate(4096);
    CHECK(y2 == y);
    a.free(x);
    a.free(y2);
    // x and y2 coalesced: an 8 KiB request fits where x was.
    void *big = a.allocate(8192);
    CHECK(big == x);
    a.free(big);
    a.free(z);
    CHECK(a.largest_free_range() == 64 * 1024);
    CHECK(a.stats().blocks == 1);
}

TEST_CASE("arena: large requests get their own block; trim gives empty blocks back") {
    auto prov = std::make_unique<CountingProvider>();
    CountingProvider *pv = prov.get();
    Arena a(std::move(prov), 1 << 16);
    void *small = a.allocate(1000);
    void *large = a.allocate(1 << 20, "large");
    CHECK(pv->allocations == 2);
    CHECK(a.stats().reserved_bytes == (1u << 16) + (1u << 20));
    a.free(large);
    a.trim();
    CHECK(pv->releases == 1);
    CHECK(a.stats().blocks == 1);
    CHECK(a.stats().reserved_bytes == (1u << 16));
    // The slot of the released block is reused for the next new block.
    void *again = a.allocate(1 << 20);
    CHECK(a.stats().blocks == 2);
    a.free(again);
    a.free(small);
}

TEST_CASE("arena: out of memory leaves existing allocations intact") {
    SUBCASE("budget") {
        Arena a(std::make_unique<HostBlockProvider>(), 1 << 16, 256, 1 << 17);
        void *p = a.allocate(60000);
        std::memset(p, 7, 60000);
        void *q = a.allocate(60000);  // a second block fits the budget of two
        const ArenaStats before = a.stats();
        try {
            a.allocate(100000, "recurrent state");
            FAIL("expected SPECLA_ERR_OUT_OF_MEMORY");
        } catch (const Error &e) {
            CHECK(e.status() == SPECLA_ERR_OUT_OF_MEMORY);
            CHECK(std::string(e.what()).find("recurrent state") != std::string::npos);
        }
        const ArenaStats after = a.stats();
        CHECK(after.reserved_bytes == before.reserved_bytes);
        CHECK(after.used_bytes == before.used_bytes);
        CHECK(after.live_allocations == before.live_allocations);
        CHECK(static_cast<unsigned char *>(p)[59999] == 7);
        a.free(q);
        void *r = a.allocate(60000);  // freed space is usable after the failure
        CHECK(r == q);
        a.free(r);
        a.free(p);
    }
    SUBCASE("provider refuses") {
        auto prov = std::make_unique<CountingProvider>();
        CountingProvider *pv = prov.get();
        Arena a(std::move(prov), 1 << 16);
        void *p = a.allocate(1000);
        pv->refuse = true;
        CHECK_THROWS_AS(a.allocate(1 << 17), Error);
        CHECK(a.stats().live_allocations == 1);
        void *q = a.allocate(1000);  // still fits in the existing block
        CHECK(q != p);
        a.free(p);
        a.free(q);
    }
}

TEST_CASE("arena: random allocation pattern keeps ranges disjoint and coalesces fully") {
    std::random_device rd;
    const unsigned seed = rd();
    INFO("seed ", seed);
    std::mt19937 rng(seed);
    Arena a(std::make_unique<HostBlockProvider>(), 1 << 20);
    struct R { void *p; size_t n; unsigned char tag; };
    std::vector<R> live;
    for (int step = 0; step < 3000; ++step) {
        if (live.empty() || rng() % 3 != 0) {
            const size_t n = 1 + rng() % 20000;
            void *p = a.allocate(n);
            const unsigned char tag = static_cast<unsigned char>(rng());
            std::memset(p, tag, n);
            live.push_back({p, n, tag});
        } else {
            const size_t i = rng() % live.size();
            const R r = live[i];
            // Contents survive other allocations: no overlap.
            const unsigned char *c = static_cast<unsigned char *>(r.p);
            REQUIRE(c[0] == r.tag);
            REQUIRE(c[r.n - 1] == r.tag);
            a.free(r.p);
            live.erase(live.begin() + long(i));
        }
    }
    size_t used = 0;
    for (const R &r : live) used += (r.n + 255) / 256 * 256;
    CHECK(a.stats().used_bytes == used);
    CHECK(a.stats().live_allocations == int32_t(live.size()));
    for (const R &r : live) a.free(r.p);
    CHECK(a.stats().used_bytes == 0);
    CHECK(a.largest_free_range() == (1u << 20));
    CHECK_THROWS_AS(a.free(reinterpret_cast<void *>(0x1000)), Error);
}

TEST_CASE("arena: per-device pools are independent") {
    DeviceArenaPool pool([](int32_t) -> std::unique_ptr<BlockProvider> { return std::make_unique<HostBlockProvider>(); },
                         1 << 16);
    Arena &d0 = pool.for_device(0);
    Arena &d1 = pool.for_device(1);
    CHECK(&d0 != &d1);
    CHECK(&pool.for_device(0) == &d0);
    void *p = d0.allocate(100), *q = d1.allocate(100);
    CHECK(pool.stats().blocks == 2);
    CHECK(pool.stats().live_allocations == 2);
    d0.free(p);
    d1.free(q);
    {
        ArenaBuffer b(d0, 1000, "raii");
        CHECK(d0.stats().live_allocations == 1);
        ArenaBuffer moved = std::move(b);
        CHECK(b.get() == nullptr);
        CHECK(moved.get() != nullptr);
    }
    CHECK(d0.stats().live_allocations == 0);
}
