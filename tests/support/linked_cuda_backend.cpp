// Programs that link the CUDA backend's objects themselves (the internal tests, the engine-level
// benchmarks) use that copy for SPECLA_BACKEND_CUDA instead of loading libspecla_cuda.so: they
// link the static engine, which has no library file for the module to sit next to, and their
// CUDA tests then exercise exactly the code they were built with.
#ifdef SPECLA_WITH_CUDA
#include "backend/cuda/cuda_backend.h"
#include "engine/cuda_module.h"

namespace {

const bool g_registered = (specla::use_linked_cuda_backend(&specla::make_cuda_backend), true);

}  // namespace
#endif
