// Error checking and small RAII helpers of the CUDA backend (host side).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <memory>

#include "memory/gpu_arena.h"
#include "util/error.h"

namespace specla {
namespace cuda {

// Throws SPECLA_ERR_DEVICE naming the operation (out-of-memory errors as SPECLA_ERR_OUT_OF_MEMORY).
void check(cudaError_t e, const char *what);
void check(cublasStatus_t s, const char *what);

#define SPECLA_CUDA_CHECK(call) ::specla::cuda::check((call), #call)

// Makes `device` current for the calling thread for the lifetime of the guard.
class DeviceGuard {
public:
    explicit DeviceGuard(int device);
    ~DeviceGuard();
    DeviceGuard(const DeviceGuard &) = delete;
    DeviceGuard &operator=(const DeviceGuard &) = delete;

private:
    int previous_ = -1;
    bool changed_ = false;
};

// cudaMalloc/cudaFree blocks for the arena; allocation failure returns null (the arena reports it).
class CudaBlockProvider final : public BlockProvider {
public:
    explicit CudaBlockProvider(int device);
    void *allocate_block(size_t bytes) override;
    void release_block(void *base, size_t bytes) override;
    const char *name() const override { return name_; }

private:
    int device_;
    char name_[32];
};

std::unique_ptr<BlockProvider> make_cuda_block_provider(int32_t device);

}  // namespace cuda
}  // namespace specla
