// create_cuda_backend(): loads the CUDA module (engine/cuda_module.h) on first use.
//
// The module is looked for next to the shared object that contains this code (dladdr), under the
// name SPECLA_CUDA_MODULE_FILE (libspecla_cuda.so.<ABI>): the build tree and an installed libdir
// both hold the two side by side. A library linked into a program some other way (no file found
// by dladdr) falls back to the dynamic loader's search path. The outcome of the first attempt,
// success or the reason for failure, is kept for the life of the process: dlopen is not retried.
#include "engine/cuda_module.h"

#include <atomic>
#include <string>

#include "util/error.h"
#include "util/log.h"

#ifdef SPECLA_WITH_CUDA
#include <dlfcn.h>
#include <cstring>
#endif

namespace specla {
namespace {

std::atomic<CudaBackendFactory> g_linked_factory{nullptr};

}  // namespace

void use_linked_cuda_backend(CudaBackendFactory factory) { g_linked_factory.store(factory); }

#ifndef SPECLA_WITH_CUDA

std::unique_ptr<Backend> create_cuda_backend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                                             size_t arena_block_bytes) {
    if (CudaBackendFactory linked = g_linked_factory.load()) return linked(config, weights, device, arena_block_bytes);
    fail(SPECLA_ERR_BACKEND_UNAVAILABLE,
         "the CUDA backend was requested but this build of SpecLA has no CUDA support "
         "(rebuild with the CUDA toolkit present, or use SPECLA_BACKEND_CPU)");
}

#else

namespace {

int host_log_enabled(specla_log_level level) { return log_enabled(level) ? 1 : 0; }
void host_log_message(specla_log_level level, const char *message) { log_message(level, message); }
const CudaModuleHost kHost = {host_log_enabled, host_log_message};

// The module file beside the object this function is in, or the bare name (search path).
std::string module_path() {
    Dl_info info{};
    if (dladdr(reinterpret_cast<void *>(&module_path), &info) != 0 && info.dli_fname != nullptr) {
        const std::string self = info.dli_fname;
        const size_t slash = self.rfind('/');
        if (slash != std::string::npos) return self.substr(0, slash + 1) + SPECLA_CUDA_MODULE_FILE;
    }
    return SPECLA_CUDA_MODULE_FILE;
}

struct LoadedModule {
    const CudaModuleTable *table = nullptr;  // null: not usable, `error` says why
    std::string path;
    std::string error;
};

LoadedModule load_module() {
    LoadedModule m;
    m.path = module_path();
    const std::string &path = m.path;
    const char *hint = "; the CUDA backend needs the module installed next to libspecla and the CUDA libraries "
                       "(cuBLAS, the NVIDIA driver) on the library path, or use SPECLA_BACKEND_CPU";
    // RTLD_LOCAL: the module's symbols (it exports only its entry point) stay out of the process's
    // global scope; RTLD_NOW: a missing CUDA library or symbol shows up here, not at a later call.
    void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char *why = dlerror();
        m.error = detail::concat("cannot load the CUDA module ", path, ": ", why ? why : "unknown dlopen error", hint);
        return m;
    }
    auto entry = reinterpret_cast<specla_cuda_module_entry>(dlsym(handle, SPECLA_CUDA_MODULE_ENTRY));
    if (entry == nullptr) {
        m.error = detail::concat("the CUDA module ", path, " has no entry point " SPECLA_CUDA_MODULE_ENTRY,
                                 " (not a SpecLA CUDA module)");
        dlclose(handle);
        return m;
    }
    const CudaModuleTable *t = entry();
    if (t == nullptr || t->interface_version != kCudaModuleInterfaceVersion) {
        m.error = detail::concat("the CUDA module ", path, " has interface version ", t ? int64_t(t->interface_version) : -1,
                                 ", this library needs ", kCudaModuleInterfaceVersion,
                                 " (a module of another SpecLA version; reinstall both from one build)");
        dlclose(handle);
        return m;
    }
    if (t->build_id == nullptr || std::strcmp(t->build_id, SPECLA_BUILD_ID) != 0) {
        m.error = detail::concat("the CUDA module ", path, " comes from build '", t->build_id ? t->build_id : "?",
                                 "', this library from build '", SPECLA_BUILD_ID,
                                 "' (the library and its CUDA module must be installed from one build)");
        dlclose(handle);
        return m;
    }
    t->attach(&kHost);
    // Never dlclose'd: backends, their states and the CUDA runtime's own state live in it until exit.
    m.table = t;
    return m;
}

const LoadedModule &module() {
    static const LoadedModule m = load_module();  // thread-safe, once per process
    // Logged outside the initialisation above: a log callback may call back into the library.
    static std::atomic<bool> reported{false};
    if (m.table != nullptr && !reported.exchange(true))
        log(SPECLA_LOG_INFO, "loaded the CUDA module ", m.path, " (kernels for ",
            m.table->architectures ? m.table->architectures : "?", ")");
    return m;
}

}  // namespace

std::unique_ptr<Backend> create_cuda_backend(const ModelConfig &config, const ModelWeights &weights, int32_t device,
                                             size_t arena_block_bytes) {
    if (CudaBackendFactory linked = g_linked_factory.load()) return linked(config, weights, device, arena_block_bytes);
    const LoadedModule &m = module();
    if (m.table == nullptr) fail(SPECLA_ERR_BACKEND_UNAVAILABLE, m.error);
    return m.table->create_backend(config, weights, device, arena_block_bytes);
}

#endif  // SPECLA_WITH_CUDA

}  // namespace specla
