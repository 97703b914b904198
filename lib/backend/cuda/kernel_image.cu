#include "backend/cuda/kernel_image.h"

#include "util/error.h"

namespace specla {
namespace cuda {
namespace {

// Compiled with exactly the -gencode flags of every kernel in kernels/ (one flag set for all CUDA
// sources of the build), so its fatbinary holds the same images as theirs: if the driver finds
// (or can JIT) an image of it for the device, it finds one of them.
__global__ void kernel_image_probe() {}

}  // namespace

const char *kernel_architectures() { return SPECLA_CUDA_ARCHITECTURES; }

void require_kernel_image(int device, const cudaDeviceProp &prop) {
    cudaFuncAttributes attributes{};
    const cudaError_t e = cudaFuncGetAttributes(&attributes, kernel_image_probe);
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();
    fail(SPECLA_ERR_BACKEND_UNAVAILABLE, "CUDA device ", device, " (", prop.name, ") is sm_", prop.major, prop.minor,
         ", but this build's kernels are compiled for ", SPECLA_CUDA_ARCHITECTURES, " only (", cudaGetErrorName(e),
         "); build SpecLA with SPECLA_CUDA_GENCODE naming sm_", prop.major, prop.minor,
         " where the kernels support it (see the README), or use SPECLA_BACKEND_CPU");
}

}  // namespace cuda
}  // namespace specla
