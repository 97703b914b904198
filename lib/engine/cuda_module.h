// The boundary between libspecla and its CUDA module (libspecla_cuda.so.<ABI>).
//
// The CUDA backend (lib/backend/cuda, kernels/) and everything that needs cuBLAS and the CUDA
// runtime live in a separate shared object that the library loads with dlopen() the first time a
// model asks for SPECLA_BACKEND_CUDA, so that libspecla.so itself needs no CUDA library: one build
// serves GPU hosts and CPU-only hosts, and a CPU-only process never maps cuBLAS.
//
// The module exports one C function, specla_cuda_module_v1(), returning the table below. Its
// first members (interface_version, build_id) are plain C and are checked before anything else is
// touched, so that a module of another build or another interface version is refused with a
// message instead of being called. The rest of the table passes C++ objects (ModelConfig,
// ModelWeights, the Backend subclass and its states, specla::Error exceptions): this is sound only
// because the library and the module are compiled from the same sources in the same build with
// the same compiler and share one libstdc++ (both link it dynamically), which is what the build id
// stands for. Exceptions thrown inside the module (specla::Error from the backend's methods,
// std::bad_alloc) propagate through these calls and are caught by the library's C shim
// (lib/api/guard.h): libstdc++ matches exception types across shared objects by their mangled
// names, so specla::Error keeps its status and message (tests/install/cuda_module_test.sh checks
// it on a machine without a GPU, where the module's backend constructor throws).
//
// The module has no logger of its own: its specla::log_enabled/log_message forward to the
// library's sink (util/log.cpp, the callback installed with specla_set_log_callback), handed over
// in a CudaModuleHost by attach() before any other call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "engine/backend.h"

namespace specla {

// Bumped whenever the table's layout or a signature in it changes.
constexpr uint32_t kCudaModuleInterfaceVersion = 1;

// What the library lends the module (plain C function pointers, valid while the library is loaded).
struct CudaModuleHost {
    int (*log_enabled)(specla_log_level level);
    void (*log_message)(specla_log_level level, const char *message);
};

using CudaBackendFactory = std::unique_ptr<Backend> (*)(const ModelConfig &config, const ModelWeights &weights,
                                                       int32_t device, size_t arena_block_bytes);

struct CudaModuleTable {
    uint32_t interface_version;  // kCudaModuleInterfaceVersion of the module's build
    const char *build_id;        // SPECLA_BUILD_ID of the module's build; must equal the library's
    const char *architectures;   // the GPU architectures its kernels are built for, e.g. "sm_90a"
    void (*attach)(const CudaModuleHost *host);
    // Throws specla::Error (SPECLA_ERR_BACKEND_UNAVAILABLE when no usable device `device` exists).
    CudaBackendFactory create_backend;
};

// Internal test programs and benchmarks link the CUDA backend into the program itself
// (tests/support/linked_cuda_backend.cpp): create_cuda_backend() then uses `factory` and never
// loads the module.
void use_linked_cuda_backend(CudaBackendFactory factory);

}  // namespace specla

#define SPECLA_CUDA_MODULE_ENTRY "specla_cuda_module_v1"
extern "C" {
typedef const specla::CudaModuleTable *(*specla_cuda_module_entry)(void);
}
