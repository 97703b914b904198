// C API: saving, restoring and copying a session's state; a session's memory.
#include "api/guard.h"
#include "api/handles.h"
#include "api/params.h"
#include "api/struct_size.h"
#include "session/session.h"
#include "session/session_state.h"

using namespace specla;

static_assert(SPECLA_SESSION_STATE_VERSION == kSessionStateVersion, "header and format disagree on the version");

extern "C" {

SPECLA_API specla_status specla_session_save_state(specla_session *session, void *buf, size_t capacity,
                                                   size_t *n_needed) {
    return guarded([&] {
        require_arg(session, "session");
        require_no_generation(session);  // its state is in flux until the generation ends
        Session &s = *session->impl;
        const size_t needed = encoded_state_size(s);
        if (n_needed) *n_needed = needed;
        require(capacity >= needed, SPECLA_ERR_CAPACITY, "session state buffer holds ", capacity, " bytes but ",
                needed, " are needed");
        require_arg(buf, "buf");
        encode_state(s, static_cast<unsigned char *>(buf));
    });
}

SPECLA_API specla_status specla_session_load_state(specla_session *session, const void *buf, size_t size) {
    return guarded([&] {
        require_arg(session, "session");
        require_no_generation(session);  // its state is in flux until the generation ends
        require_arg(buf, "buf");
        decode_state(*session->impl, static_cast<const unsigned char *>(buf), size, "session state buffer");
    });
}

SPECLA_API specla_status specla_session_save_state_file(specla_session *session, const char *path) {
    return guarded([&] {
        require_arg(session, "session");
        require_no_generation(session);  // its state is in flux until the generation ends
        require_arg(path, "path");
        save_state_file(*session->impl, path);
    });
}

SPECLA_API specla_status specla_session_load_state_file(specla_session *session, const char *path) {
    return guarded([&] {
        require_arg(session, "session");
        require_no_generation(session);  // its state is in flux until the generation ends
        require_arg(path, "path");
        load_state_file(*session->impl, path);
    });
}

SPECLA_API specla_status specla_session_copy_state(specla_session *dst, specla_session *src) {
    return guarded([&] {
        require_arg(dst, "dst");
        require_arg(src, "src");
        require_no_generation(dst);
        require_no_generation(src);
        copy_state(*src->impl, *dst->impl);
    });
}

SPECLA_API specla_status specla_session_get_memory(const specla_session *session, specla_session_memory *out) {
    return guarded([&] {
        require_arg(session, "session");
        require_arg(out, "out");
        const Session::Memory m = session->impl->memory();
        specla_session_memory r{};
        r.state_bytes = m.backend.state_bytes;
        r.factor_bytes = m.backend.factor_bytes;
        r.scratch_bytes = m.backend.scratch_bytes + m.own_bytes;
        r.context_bytes = m.context_bytes;
        r.host_bytes = m.backend.host_bytes + m.own_bytes + m.context_bytes;
        r.device_bytes = m.backend.device_bytes;
        r.total_bytes = r.host_bytes + r.device_bytes;
        write_info(out, r, "specla_session_memory");
    });
}

}  // extern "C"
