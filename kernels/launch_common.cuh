// What every kernel launcher takes: the stream, whether to use programmatic dependent launch, and
// the device's multiprocessor count (grid sizing). Host-visible: plain C++, no device code.
#pragma once

#include <cuda_runtime_api.h>
#include <stdint.h>

namespace specla {
namespace kern {

struct LaunchCtx {
    cudaStream_t stream = nullptr;
    bool pdl = false;      // launch with cudaLaunchAttributeProgrammaticStreamSerialization
    int32_t sm_count = 1;  // multiprocessors of the device
};

}  // namespace kern
}  // namespace specla
