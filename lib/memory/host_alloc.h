// Host allocations of the engine go through mimalloc: weights converted at load, activations,
// states of CPU sessions. HostVec is the container used for all of them.
#pragma once

#include <mimalloc.h>

#include <vector>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SPECLA_HOST_ALLOC_STD 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SPECLA_HOST_ALLOC_STD 1
#endif
#endif

namespace specla {

#ifdef SPECLA_HOST_ALLOC_STD
// AddressSanitizer builds use the standard allocator: ASan cannot see inside mimalloc's pages, and
// these buffers (weights, activations, states) are where an out-of-bounds access would land.
template <typename T>
using HostVec = std::vector<T>;
#else
template <typename T>
using HostVec = std::vector<T, mi_stl_allocator<T>>;
#endif

}  // namespace specla
