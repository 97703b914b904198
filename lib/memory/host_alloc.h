// Host allocations of the engine go through mimalloc: weights converted at load, activations,
// states of CPU sessions. HostVec is the container used for all of them.
#pragma once

#include <mimalloc.h>

#include <vector>

namespace specla {

template <typename T>
using HostVec = std::vector<T, mi_stl_allocator<T>>;

}  // namespace specla
