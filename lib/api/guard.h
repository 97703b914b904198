// The one place where C++ exceptions become C status codes. Every exported function that can
// fail runs its body through guarded(): specla::Error keeps its status, std::bad_alloc becomes
// SPECLA_ERR_OUT_OF_MEMORY, anything else SPECLA_ERR_INTERNAL. The message goes to the calling
// thread's last-error slot.
#pragma once

#include <new>
#include <string>

#include "specla/specla.h"
#include "util/error.h"

namespace specla {

void set_last_error(const std::string &message);

template <typename Body>
specla_status guarded(Body &&body) noexcept {
    try {
        body();
        return SPECLA_OK;
    } catch (const Error &e) {
        set_last_error(e.what());
        return e.status();
    } catch (const std::bad_alloc &) {
        set_last_error("out of host memory");
        return SPECLA_ERR_OUT_OF_MEMORY;
    } catch (const std::exception &e) {
        set_last_error(std::string("internal error: ") + e.what());
        return SPECLA_ERR_INTERNAL;
    } catch (...) {
        set_last_error("internal error: unknown exception");
        return SPECLA_ERR_INTERNAL;
    }
}

// NULL checks with a message naming the parameter.
inline void require_arg(const void *p, const char *name) {
    require(p != nullptr, SPECLA_ERR_INVALID_ARGUMENT, name, " must not be NULL");
}

}  // namespace specla
