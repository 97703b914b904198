// Wall-clock seconds since a steady_clock time point: how the speculative loop and the drafters
// time their passes for the tree builder's cost model.
#pragma once

#include <chrono>

namespace specla {

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace specla
