// Version query, status names and the thread-local last-error message.
#include <string>

#include "api/caller_enum.h"
#include "api/guard.h"

namespace specla {
namespace {
thread_local std::string t_last_error;
}
void set_last_error(const std::string &message) { t_last_error = message; }
}  // namespace specla

extern "C" {

SPECLA_API const char *specla_version(void) { return SPECLA_VERSION_STRING; }

SPECLA_API void specla_version_numbers(int *major, int *minor, int *patch) {
    if (major) *major = SPECLA_VERSION_MAJOR;
    if (minor) *minor = SPECLA_VERSION_MINOR;
    if (patch) *patch = SPECLA_VERSION_PATCH;
}

SPECLA_API int specla_abi_version(void) { return SPECLA_ABI_VERSION; }

SPECLA_API bool specla_has_cuda(void) {
#ifdef SPECLA_WITH_CUDA
    return true;
#else
    return false;
#endif
}

SPECLA_API const char *specla_last_error(void) { return specla::t_last_error.c_str(); }

SPECLA_API const char *specla_status_string(specla_status status) {
    switch (specla::caller_enum(status)) {
        case SPECLA_OK: return "SPECLA_OK: success";
        case SPECLA_ERR_INVALID_ARGUMENT: return "SPECLA_ERR_INVALID_ARGUMENT: invalid argument";
        case SPECLA_ERR_IO: return "SPECLA_ERR_IO: input/output error";
        case SPECLA_ERR_FORMAT: return "SPECLA_ERR_FORMAT: malformed file";
        case SPECLA_ERR_UNSUPPORTED: return "SPECLA_ERR_UNSUPPORTED: unsupported model or feature";
        case SPECLA_ERR_SHAPE: return "SPECLA_ERR_SHAPE: missing tensor or wrong shape";
        case SPECLA_ERR_TOKEN_OUT_OF_RANGE: return "SPECLA_ERR_TOKEN_OUT_OF_RANGE: token id out of range";
        case SPECLA_ERR_OUT_OF_MEMORY: return "SPECLA_ERR_OUT_OF_MEMORY: out of memory";
        case SPECLA_ERR_BACKEND_UNAVAILABLE: return "SPECLA_ERR_BACKEND_UNAVAILABLE: backend not available";
        case SPECLA_ERR_DEVICE: return "SPECLA_ERR_DEVICE: GPU runtime error";
        case SPECLA_ERR_ABORTED: return "SPECLA_ERR_ABORTED: aborted by callback";
        case SPECLA_ERR_CAPACITY: return "SPECLA_ERR_CAPACITY: output buffer too small";
        case SPECLA_ERR_STATE: return "SPECLA_ERR_STATE: invalid in the current state";
        case SPECLA_ERR_INTERNAL: return "SPECLA_ERR_INTERNAL: internal error";
    }
    return "SPECLA_ERR_UNKNOWN: unknown status code";
}

}  // extern "C"
