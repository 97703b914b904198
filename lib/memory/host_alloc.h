// Host allocations of the engine's big buffers (weights converted at load, activations, states of
// CPU sessions): HostVec is the container used for all of them. Its memory comes from mimalloc's
// explicit API (see host_alloc.cpp for how mimalloc is reached without it replacing the process's
// malloc and operator new), 64-byte aligned. A failed allocation throws std::bad_alloc, which the
// C shim reports as SPECLA_ERR_OUT_OF_MEMORY. Live HostVec bytes are counted (host_alloc_stats), so
// that what a session reports as its footprint can be checked against what it allocated.
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
// Releases what host_alloc(bytes) returned; nullptr is a no-op.
void host_free(void *p, size_t bytes) noexcept;

// What host_alloc has handed out and not yet taken back, process-wide (diagnostics and tests).
struct HostAllocStats {
    size_t live_bytes = 0;   // requested bytes, as HostVec capacities count them
    size_t live_blocks = 0;
};
HostAllocStats host_alloc_stats() noexcept;

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
    void deallocate(T *p, size_t n) noexcept { host_free(p, n * sizeof(T)); }

    template <typename U>
    bool operator==(const HostAllocator<U> &) const noexcept { return true; }
    template <typename U>
    bool operator!=(const HostAllocator<U> &) const noexcept { return false; }
};

// Sanitizer builds (SPECLA_HOST_ALLOC_STD) take the memory from the C library's aligned
// allocation, which the sanitizers intercept: ASan cannot see inside mimalloc's pages, and these
// buffers (weights, activations, states) are where an out-of-bounds access would land.
template <typename T>
using HostVec = std::vector<T, HostAllocator<T>>;

}  // namespace specla
