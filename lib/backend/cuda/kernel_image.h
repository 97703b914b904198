// Whether this build's kernels can run on a device at all. The kernels are compiled for the
// architectures of SPECLA_CUDA_GENCODE only; a device of another architecture (older, or newer
// without a PTX image it can JIT) would otherwise pass every check and then fail at the first
// launch with "no kernel image".
#pragma once

#include <cuda_runtime_api.h>

namespace specla {
namespace cuda {

// The architectures the kernels are built for, from SPECLA_CUDA_GENCODE: "sm_90a", "sm_90, compute_90 (PTX)".
const char *kernel_architectures();

// Throws SPECLA_ERR_BACKEND_UNAVAILABLE naming the device's sm_XY and kernel_architectures()
// when the kernels have no image for `device` (which must be the current device).
void require_kernel_image(int device, const cudaDeviceProp &prop);

}  // namespace cuda
}  // namespace specla
