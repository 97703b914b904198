// The CUDA module's side of the boundary described in engine/cuda_module.h: its one exported
// function, and the logging that forwards to the library's sink.
//
// Only the module is built from this file. It replaces util/log.cpp there: the engine objects the
// module links (lib/backend/cuda, and the few engine files they need, taken from the engine archive
// by the linker) call specla::log_enabled/log_message, which land here and go to the host's log
// sink, so that the library and the module share one callback, one level and one lock. (Should
// the linker ever take util/log.cpp from the archive as well, the module fails to link with a
// duplicate definition, rather than logging to a second sink.)
#include <atomic>
#include <string>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/kernel_image.h"
#include "engine/cuda_module.h"
#include "util/log.h"

namespace specla {
namespace {

std::atomic<const CudaModuleHost *> g_host{nullptr};

void attach(const CudaModuleHost *host) { g_host.store(host); }

}  // namespace

bool log_enabled(specla_log_level level) {
    const CudaModuleHost *host = g_host.load();
    return host != nullptr && host->log_enabled(level) != 0;
}

void log_message(specla_log_level level, const std::string &message) {
    if (const CudaModuleHost *host = g_host.load()) host->log_message(level, message.c_str());
}

}  // namespace specla

extern "C" __attribute__((visibility("default"))) const specla::CudaModuleTable *specla_cuda_module_v1(void) {
    static const specla::CudaModuleTable table = {
        specla::kCudaModuleInterfaceVersion,
        SPECLA_BUILD_ID,
        specla::cuda::kernel_architectures(),
        specla::attach,
        specla::make_cuda_backend,
    };
    return &table;
}
