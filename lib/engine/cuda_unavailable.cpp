// The CUDA backend's entry point in a library built without CUDA.
#ifndef SPECLA_WITH_CUDA
#include "engine/backend.h"
#include "util/error.h"

namespace specla {

std::unique_ptr<Backend> create_cuda_backend(const ModelConfig &, const ModelWeights &, int32_t, size_t) {
    fail(SPECLA_ERR_BACKEND_UNAVAILABLE,
         "the CUDA backend was requested but this build of SpecLA has no CUDA support "
         "(rebuild with the CUDA toolkit present, or use SPECLA_BACKEND_CPU)");
}

}  // namespace specla
#endif
