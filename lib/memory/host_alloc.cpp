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

#include <cstdlib>

#include "util/log.h"

namespace specla {
namespace {

struct AllocatorEntryPoints {
    decltype(&mi_malloc_aligned) malloc_aligned = nullptr;
    decltype(&mi_free) free = nullptr;
};

AllocatorEntryPoints load_mimalloc() {
    AllocatorEntryPoints a;
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

}  // namespace

void *host_alloc(size_t bytes) {
    const AllocatorEntryPoints &a = allocator();
    void *p = nullptr;
    if (a.malloc_aligned) {
        p = a.malloc_aligned(bytes, kHostAlignment);
    } else if (posix_memalign(&p, kHostAlignment, bytes) != 0) {
        p = nullptr;
    }
    if (!p) throw std::bad_alloc();
    return p;
}

void host_free(void *p) noexcept {
    if (!p) return;
    const AllocatorEntryPoints &a = allocator();
    if (a.free) a.free(p);
    else std::free(p);
}

}  // namespace specla
