// Host allocations of the engine's big buffers (weights converted at load, activations, states of
// CPU sessions): HostVec is the container used for all of them. Its memory comes from mimalloc's
// explicit API (see host_alloc.cpp for how mimalloc is reached without it replacing the process's
// malloc and operator new), 64-byte aligned. A failed allocation throws std::bad_alloc, which the
// C shim reports as SPECLA_ERR_OUT_OF_MEMORY.
#pragma once

#include <cstddef>
#include <limits>
#include <new>
#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPECLA_HOST_ALLOC_STD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPECLA_HOST_ALLOC_STD 1
#endif
#endif

namespace specla {

// `bytes` (> 0) of host memory aligned to kHostAlignment; throws std::bad_alloc when there is none.
constexpr size_t kHostAlignment = 64;
void *host_alloc(size_t bytes);
// Releases what host_alloc returned; nullptr is a no-op.
void host_free(void *p) noexcept;

template <typename T>
struct HostAllocator {
    using value_type = T;
    HostAllocator() noexcept = default;
    template <typename U>
    HostAllocator(const HostAllocator<U> &) noexcept {}

    T *allocate(size_t n) {
        if (n > std::numeric_limits<size_t>::max() / sizeof(T)) throw std::bad_alloc();
        return static_cast<T *>(host_alloc(n * sizeof(T)));
    }
    void deallocate(T *p, size_t) noexcept { host_free(p); }

    template <typename U>
    bool operator==(const HostAllocator<U> &) const noexcept { return true; }
    template <typename U>
    bool operator!=(const HostAllocator<U> &) const noexcept { return false; }
};

#ifdef SPECLA_HOST_ALLOC_STD
// AddressSanitizer builds use the standard allocator: ASan cannot see inside mimalloc's pages, and
// these buffers (weights, activations, states) are where an out-of-bounds access would land.
template <typename T>
using HostVec = std::vector<T>;
#else
template <typename T>
using HostVec = std::vector<T, HostAllocator<T>>;
#endif

}  // namespace specla
