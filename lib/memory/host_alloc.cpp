// Where HostVec's memory comes from.
//
// Debian's libmimalloc is built to override: it exports malloc, free and the global operator
// new/delete. Linked as a NEEDED library it would put them into the lookup scope of libspecla (and,
// in an executable linked against libspecla, of the whole process), so that memory allocated by
// one allocator is freed by the other as soon as libstdc++ was loaded before it — a host that
// loaded another C++ library privately, as Python does for extension modules, crashed at
// libspecla's first allocation. Its C++ entry points (mi_new_n behind mi_stl_allocator) also
// abort() the process when memory runs out, since the C library cannot throw.
//
// So libspecla does not link mimalloc. It loads it privately (RTLD_LOCAL: its malloc and operator
// new are visible to no other object) the first time a big buffer is needed, and calls only its
// explicit API, which returns NULL on failure; HostAllocator turns that into std::bad_alloc. Where
// mimalloc cannot be loaded, the C library's aligned allocation serves instead (same contract).
#include "memory/host_alloc.h"

#include <dlfcn.h>
#include <mimalloc.h>

#include <atomic>
#include <cstdlib>

#include "util/log.h"

namespace specla {
namespace {

struct AllocatorEntryPoints {
    decltype(&mi_malloc_aligned) malloc_aligned = nullptr;
    decltype(&mi_free) free = nullptr;
};

#ifdef SPECLA_HOST_ALLOC_STD
constexpr bool kSanitizerBuild = true;
#else
constexpr bool kSanitizerBuild = false;
#endif

AllocatorEntryPoints load_mimalloc() {
    AllocatorEntryPoints a;
    // Sanitizer builds: the C library's allocator, whose blocks the sanitizer checks.
    if (kSanitizerBuild) return a;
    void *lib = dlopen(SPECLA_MIMALLOC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        log(SPECLA_LOG_DEBUG, "mimalloc (", SPECLA_MIMALLOC_SONAME, ") not loaded: ", dlerror(),
            "; host buffers use the C library's allocator");
        return a;
    }
    a.malloc_aligned = reinterpret_cast<decltype(&mi_malloc_aligned)>(dlsym(lib, "mi_malloc_aligned"));
    a.free = reinterpret_cast<decltype(&mi_free)>(dlsym(lib, "mi_free"));
    if (!a.malloc_aligned || !a.free) a = AllocatorEntryPoints{};
    // Never unloaded: buffers may outlive any one model, and a process loads it at most once.
    return a;
}

// Chosen once per process, so that every buffer is freed by the allocator that made it.
const AllocatorEntryPoints &allocator() {
    static const AllocatorEntryPoints a = load_mimalloc();
    return a;
}

std::atomic<size_t> live_bytes{0}, live_blocks{0};

}  // namespace

HostAllocStats host_alloc_stats() noexcept {
    HostAllocStats s;
    s.live_bytes = live_bytes.load(std::memory_order_relaxed);
    s.live_blocks = live_blocks.load(std::memory_order_relaxed);
    return s;
}

void *host_alloc(size_t bytes) {
    const AllocatorEntryPoints &a = allocator();
    void *p = nullptr;
    if (a.malloc_aligned) {
        p = a.malloc_aligned(bytes, kHostAlignment);
    } else if (posix_memalign(&p, kHostAlignment, bytes) != 0) {
        p = nullptr;
    }
    if (!p) throw std::bad_alloc();
    live_bytes.fetch_add(bytes, std::memory_order_relaxed);
    live_blocks.fetch_add(1, std::memory_order_relaxed);
    return p;
}

void host_free(void *p, size_t bytes) noexcept {
    if (!p) return;
    live_bytes.fetch_sub(bytes, std::memory_order_relaxed);
    live_blocks.fetch_sub(1, std::memory_order_relaxed);
    const AllocatorEntryPoints &a = allocator();
    if (a.free) a.free(p);
    else std::free(p);
}

}  // namespace specla
