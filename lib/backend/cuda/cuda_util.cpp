#include "backend/cuda/cuda_util.h"

#include <cstdio>

namespace specla {
namespace cuda {

void check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    (void)cudaGetLastError();  // clear a non-sticky error so later calls are not blamed for it
    if (e == cudaErrorMemoryAllocation)
        fail(SPECLA_ERR_OUT_OF_MEMORY, "CUDA out of memory in ", what, ": ", cudaGetErrorString(e));
    fail(SPECLA_ERR_DEVICE, "CUDA error in ", what, ": ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

void check(cublasStatus_t s, const char *what) {
    if (s == CUBLAS_STATUS_SUCCESS) return;
    if (s == CUBLAS_STATUS_ALLOC_FAILED) fail(SPECLA_ERR_OUT_OF_MEMORY, "cuBLAS out of memory in ", what);
    fail(SPECLA_ERR_DEVICE, "cuBLAS error ", int(s), " (", cublasGetStatusString(s), ") in ", what);
}

DeviceGuard::DeviceGuard(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) {
        check(cudaSetDevice(device), "cudaSetDevice");
        changed_ = true;
    }
}

DeviceGuard::~DeviceGuard() {
    if (changed_) (void)cudaSetDevice(previous_);
}

CudaBlockProvider::CudaBlockProvider(int device) : device_(device) {
    std::snprintf(name_, sizeof(name_), "CUDA device %d", device);
}

void *CudaBlockProvider::allocate_block(size_t bytes) {
    DeviceGuard g(device_);
    void *p = nullptr;
    const cudaError_t e = cudaMalloc(&p, bytes);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        return nullptr;
    }
    return p;
}

void CudaBlockProvider::release_block(void *base, size_t) {
    // Called from destructors: never throw.
    int prev = -1;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(device_);
    (void)cudaFree(base);
    if (prev >= 0 && prev != device_) (void)cudaSetDevice(prev);
}

std::unique_ptr<BlockProvider> make_cuda_block_provider(int32_t device) {
    return std::make_unique<CudaBlockProvider>(device);
}

}  // namespace cuda
}  // namespace specla
